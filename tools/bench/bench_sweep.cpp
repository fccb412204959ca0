// What `ringmaster sweep` pays for 1,000 points of the default experiment's
// full training step with the analytic engine (issue 10's target: under 60 s
// on the 2-core machine): the same grid -> load -> search::evaluate path as
// the CLI, with the CLI's allocator tuning. The grid is the first --points of
// partition (4) x ring (2) x grad_comm_dtype (2) x shuffle (2) x checkpoint (3)
// x cluster.nic.bandwidth_Gbps (11) = 1,056 points (each group of 11 NIC speeds
// shares one Schedule: pipeline::Session::run_point). Prints one table measured
// in one run: wall time, and the process's CPU time (on a shared machine,
// CPU s / jobs is what an idle machine would take).
//   build/bin/bench_sweep [--points N] [--jobs N] [--set path=value ...]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim/search/evaluate.hpp"
#include "sim/search/grid.hpp"
#include "tools/cli/allocator_tuning.hpp"

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  rm::cli::back_heap_with_huge_pages(argv);  // as the ringmaster executable runs
  int64_t want = 1000;
  int jobs = 0;
  std::vector<std::string> sets;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--points") && i + 1 < argc) want = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--jobs") && i + 1 < argc) jobs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--set") && i + 1 < argc) sets.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_sweep [--points N] [--jobs N] [--set path=value ...]\n");
      return 2;
    }
  }
  rm::cli::keep_freed_memory();
  using clock = std::chrono::steady_clock;
  const rm::search::Grid grid({
      rm::search::parse_grid_axis("parallel.partition=stripe,zigzag,balanced,contiguous"),
      rm::search::parse_grid_axis("parallel.ring=hierarchical,ring"),
      rm::search::parse_grid_axis("parallel.grad_comm_dtype=fp32,bf16"),
      rm::search::parse_grid_axis("parallel.shuffle=per_call,once"),
      rm::search::parse_grid_axis("parallel.checkpoint=full,selective,none"),
      rm::search::parse_grid_axis("cluster.nic.bandwidth_Gbps=100,200,300,400,500,600,700,800,900,1000,1100"),
  });
  if (want < 1 || want > grid.size()) {
    std::fprintf(stderr, "bench_sweep: --points must be in [1, %lld]\n", static_cast<long long>(grid.size()));
    return 2;
  }

  const double cpu0 = cpu_seconds();
  auto t0 = clock::now();
  const auto points = rm::search::load_grid(grid, rm::ConfigStore{}, "", sets);
  std::vector<rm::Experiment> todo;
  for (int64_t i = 0; i < want; ++i)
    if (points[i].experiment) todo.push_back(*points[i].experiment);
  const double t_load = std::chrono::duration<double>(clock::now() - t0).count();

  rm::search::EvaluateOptions o;
  o.jobs = jobs;
  t0 = clock::now();
  const auto out = rm::search::evaluate(todo, o);
  const double t_eval = std::chrono::duration<double>(clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  int64_t ok = 0, ops = 0;
  for (const auto& r : out) {
    ok += r.ok ? 1 : 0;
    ops += r.ops;
  }
  const int workers = rm::search::worker_count(jobs);
  const double wall = t_load + t_eval;
  std::printf("bench_sweep: %lld points of the default experiment's step (%lld ran, %lld ops in all), analytic, "
              "%d worker thread(s)\n",
              static_cast<long long>(want), static_cast<long long>(ok), static_cast<long long>(ops), workers);
  std::printf("%-34s %10s\n", "stage", "wall s");
  std::printf("%-34s %10.3f\n", "load the grid's experiments", t_load);
  std::printf("%-34s %10.3f\n", "evaluate (patterns, schedule, run)", t_eval);
  std::printf("%-34s %10.3f\n", "total", wall);
  std::printf("points/s %.2f; CPU %.1f s (%.3f s per point); CPU s / workers %.1f s; 1,000 points at this "
              "rate: %.0f s wall\n",
              double(want) / wall, cpu, cpu / double(want), cpu / workers, 1000.0 * wall / double(want));
  return ok == static_cast<int64_t>(todo.size()) ? 0 : 1;
}
