// Wall time of the step report and of its "bound by" analysis
// (sim/report/bound_by.hpp) on one experiment's analytic Timeline, against
// the engine run they follow: what each simulate, sweep row and plan
// candidate pays for them. Prints one table measured in one run (best of 3
// per row; the machine is shared: compare rows, not runs).
//   build/bin/bench_bound_by [--set path=value ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/step_report.hpp"

namespace {
template <class F>
double best_of_3(F&& f) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sets;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--set") && i + 1 < argc) {
      sets.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_bound_by [--set path=value ...]\n");
      return 2;
    }
  }
  const rm::Experiment e = rm::load_experiment(rm::ConfigStore{}, "", sets);
  rm::pipeline::Session session;
  const auto s = session.schedule(e);
  const auto& topo = session.topology(e);
  const auto cost = rm::cost::CostModel::for_experiment(e);
  rm::traces::Timeline tl;
  const double t_engine = best_of_3([&] { tl = rm::engine::simulate(s, topo, cost, rm::engine::EngineKind::analytic); });
  rm::report::StepReport rep;
  const double t_report = best_of_3([&] { rep = rm::report::make_step_report(e, s, tl); });
  rm::report::BoundBy b;
  const double t_bound = best_of_3(
      [&] { b = rm::report::bound_by(s, tl, topo, cost, rep.critical_path, rep.imbalance.step_measured); });
  std::printf("%s: %zu ops, %zu ranks, %zu events; %zu links loaded\n", e.name.c_str(), s.ops.size(), s.ranks.size(),
              tl.events.size(), b.links.size());
  std::printf("%-36s %10s %10s\n", "stage (best of 3)", "wall s", "of engine");
  std::printf("%-36s %10.3f %9.0f%%\n", "analytic engine (with Timeline)", t_engine, 100.0);
  std::printf("%-36s %10.3f %9.0f%%\n", "step report (breakdown, critical path)", t_report, 100 * t_report / t_engine);
  std::printf("%-36s %10.3f %9.0f%%\n", "bound by", t_bound, 100 * t_bound / t_engine);
  std::printf("verdict: %s\n", b.verdict.c_str());
  return 0;
}
