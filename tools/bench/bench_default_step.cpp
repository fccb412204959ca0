// Wall time of the default experiment's full training step through every
// stage: pattern, schedule generation, schedule write/read, and each engine.
// Prints one table measured in one run (the machine is shared: compare the
// rows, not the absolute figures across runs).
//   build/bin/bench_default_step [--no-simgrid] [--set path=value ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tools/cli/allocator_tuning.hpp"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  rm::cli::back_heap_with_huge_pages(argv);  // as the ringmaster executable runs
  bool simgrid = true;
  std::vector<std::string> sets;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-simgrid")) simgrid = false;
    else if (!std::strcmp(argv[i], "--set") && i + 1 < argc) sets.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_default_step [--no-simgrid] [--set path=value ...]\n");
      return 2;
    }
  }
  using clock = std::chrono::steady_clock;
  const rm::Experiment e = rm::load_experiment(rm::ConfigStore{}, "", sets);
  rm::pipeline::Session session;
  auto t0 = clock::now();
  session.patterns(e);
  const double t_pattern = seconds_since(t0);
  const rm::topology::Topology topo(e.cluster);
  t0 = clock::now();
  const auto s = session.schedule(e);
  const double t_generate = seconds_since(t0);

  const std::string path = (std::filesystem::temp_directory_path() / "bench_default_step.json.gz").string();
  t0 = clock::now();
  rm::schedule::write_schedule(s, path);
  const double t_write = seconds_since(t0);
  const auto file_bytes = std::filesystem::file_size(path);
  t0 = clock::now();
  const auto back = rm::schedule::read_schedule(path);
  const double t_read = seconds_since(t0);
  std::filesystem::remove(path);

  const auto cost = rm::cost::CostModel::for_experiment(e);
  t0 = clock::now();
  const auto ta = rm::engine::simulate(s, topo, cost, rm::engine::EngineKind::analytic);
  const double t_analytic = seconds_since(t0);

  // The engine's own work (plan + run, op times only), best of 3: what sweeps pay per schedule.
  double t_optimes = 1e300;
  for (int i = 0; i < 3; ++i) {
    t0 = clock::now();
    const auto times = rm::engine::run_analytic(s, topo, cost);
    t_optimes = std::min(t_optimes, seconds_since(t0));
    if (times.end.size() != s.ops.size()) return 1;
  }

  std::printf("%s: %zu ops, %zu ranks (%s)\n", e.name.c_str(), s.ops.size(), s.ranks.size(), s.generator.c_str());
  std::printf("%-38s %10s %14s\n", "stage", "wall s", "ops/s");
  std::printf("%-38s %10.3f %14s\n", "sparsity pattern", t_pattern, "");
  std::printf("%-38s %10.3f %14.0f\n", "generate schedule", t_generate, double(s.ops.size()) / t_generate);
  std::printf("%-38s %10.3f %14s\n", fmt::format("write schedule (.json.gz, {:.2f} MB)", double(file_bytes) / 1e6).c_str(),
              t_write, "");
  std::printf("%-38s %10.3f %14s\n", "read + validate schedule", t_read, back.ops.size() == s.ops.size() ? "" : "MISMATCH");
  std::printf("%-38s %10.3f %14.0f\n", "analytic engine (with Timeline)", t_analytic, double(s.ops.size()) / t_analytic);
  std::printf("%-38s %10.3f %14.0f\n", "analytic engine (op times, best of 3)", t_optimes, double(s.ops.size()) / t_optimes);
  double makespan_a = ta.makespan_s(), makespan_s = 0;
  if (simgrid) {
    t0 = clock::now();
    const auto tsg = rm::engine::simulate(s, topo, cost, rm::engine::EngineKind::simgrid);
    const double t_simgrid = seconds_since(t0);
    makespan_s = tsg.makespan_s();
    std::printf("%-38s %10.3f %14.0f\n", "simgrid engine (with Timeline)", t_simgrid, double(s.ops.size()) / t_simgrid);
  }
  std::printf("predicted step: analytic %.4f s", makespan_a);
  if (simgrid) std::printf(", simgrid %.4f s (ratio %.3f)", makespan_s, makespan_s / makespan_a);
  std::printf("\n");
  return 0;
}
