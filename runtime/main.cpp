// ringmaster-run: executes an exported Schedule, one process per rank under
// mpirun (or srun), and writes the measured Timeline (docs/runtime.md).
//   mpirun -np N ringmaster-run --schedule S.json.gz --backend cpu [--check]
//          [--iters K] [--warmup W] [--trace OUT.json]
// Exit codes (README.md, "Exit status"): 0 ok; 1 --check found an error above
// the bound; 2 bad input (every rank refuses before computing, one line from
// rank 0), a --trace destination that cannot be written included; 3 a failure
// while running (the failing rank names itself and the op; the others are
// ended by MPI_Abort, never left waiting).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "runtime/launch.hpp"
#include "traces/text_write.hpp"

int main(int argc, char** argv) {
  rm::runtime::LaunchOptions o;
  CLI::App app{"Execute an exported Schedule (one process per rank: mpirun -np N ringmaster-run ...) and record a measured Timeline",
               "ringmaster-run"};
  app.add_option("--schedule", o.schedule, "Schedule file from `ringmaster schedule` or `ringmaster plan --export` (JSON, .gz)")
      ->required();
  app.add_option("--backend", o.backend, "cpu (kernels/cpu, OpenBLAS, MPI) or cuda (kernels/cuda, cuBLAS, NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--check", o.check, "Before timing, compare outputs and gradients with a single-process reference");
  app.add_option("--iters", o.iters, "Timed iterations (every op gets this many samples; the trace keeps the median)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "Untimed iterations before the timed ones")->check(CLI::Range(0, 100000));
  // `--trace ''` would read as "no trace": refused here. Every other destination that
  // cannot be written is refused before the run by all ranks together (launch's prepare).
  const CLI::Validator writable(
      [](std::string& p) { return p.empty() ? rm::traces::output_path_problem(p) : std::string(); }, "");
  app.add_option("--trace", o.trace, "Write the measured Timeline here (Chrome trace JSON; rank 0 writes it)")
      ->check(writable);
  app.add_option("--seed", o.seed, "Seed of the random inputs (the reference uses the same)");
  app.add_option("--check-bound", o.check_bound, "Largest max relative error --check accepts (docs/runtime-check.md)");
  app.add_option("--stall-timeout", o.stall_timeout_s, "Seconds without progress before a rank gives up, naming what it waits for")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--emulate-ranks", o.emulate_ranks,
                 "cuda: run every rank of the Schedule in this one process (device copies instead of NCCL)");
  app.add_flag("--json", o.json, "Print the summary as JSON");
  app.add_option("--max-memory", o.max_memory_GB,
                 "GB one rank may allocate (default: the machine's available memory shared by its ranks)")
      ->check(CLI::PositiveNumber);
  app.add_option("--inject-fault", o.inject_fault,
                 "Testing aid: RANK:OP:fail makes that compute op throw, :hang never return, :skip do nothing");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return rm::runtime::launch(o, &argc, &argv);
}
