// The SimGrid engine's own cost per op as the cluster grows: a synthetic ring
// (compute overlapped with a neighbour exchange, 3 ops per rank and step, about
// 100K ops at every size) on a100-80g-8x8-hdr widened to 4 .. 64 nodes, timed
// around run_simgrid alone (platform build, fork, simulation, op times back;
// no schedule generation, no Timeline). The ring's routes are computed (and
// cached in the Topology) before the clock starts and timed apart, so the
// SimGrid column is SimGrid's own share. Prints one row per size, measured in
// one run; best of 3 to damp the noise of shared cores. Then the same split
// (routes, then run_simgrid alone, once) on one forward attention layer of the
// default experiment with a stripe partition at cp = 512 on 64 nodes.
//   build/bin/bench_simgrid_scale [--no-layer]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <utility>
#include <string>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/cost/collective_plan.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/exec_plan.hpp"
#include "sim/engine/simgrid_engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/call_shape.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"
#include "tests/support/synthetic_schedules.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rm;
  const bool layer = !(argc > 1 && std::string(argv[1]) == "--no-layer");
  auto cfg = ConfigStore().load("clusters", "a100-80g-8x8-hdr", "bench");
  Cluster cluster = parse_cluster(JsonReader(cfg.json, cfg.source));
  std::printf("%-8s %10s %12s %12s %12s\n", "ranks", "ops", "routes s", "simgrid s", "us per op");
  for (int ranks : {32, 128, 512}) {
    cluster.nodes = ranks / cluster.gpus_per_node;
    const topology::Topology topo(cluster);
    const cost::CostModel model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu));
    const int steps = std::max(2, 100000 / (3 * ranks));
    const auto s = engine::ring_schedule({ranks, 0, steps, 1e11, 16 << 20});
    const auto r0 = std::chrono::steady_clock::now();
    for (int r = 0; r < ranks; ++r) topo.route(r, (r + 1) % ranks);
    const double routes = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    double best = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto times = engine::run_simgrid(s, topo, model);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (times.end.empty()) return 1;
    }
    std::printf("%-8d %10zu %12.3f %12.3f %12.2f\n", ranks, s.ops.size(), routes, best,
                1e6 * best / double(s.ops.size()));
  }
  if (!layer) return 0;

  const Experiment e = load_experiment(
      ConfigStore(), "", {"cluster.nodes=64", "parallel.cp=512", "parallel.partition=stripe", "scope=attention_fwd"});
  auto t0 = std::chrono::steady_clock::now();
  pipeline::Session session;
  const auto s = session.schedule(e);
  const double gen = seconds_since(t0);
  const topology::Topology topo(e.cluster);
  const auto m = cost::CostModel::for_experiment(e);
  // The GPU pairs run_simgrid routes: sends, and every collective's plan.
  t0 = std::chrono::steady_clock::now();
  const schedule::RunPlan plan(s);
  std::set<std::pair<int, int>> pairs;
  auto gpu = [&](int64_t op) { return s.ranks[static_cast<size_t>(s.ops[static_cast<size_t>(op)].rank)].gpu; };
  for (const auto& op : s.ops)
    if (op.kind == schedule::OpKind::send) pairs.insert({gpu(op.id), s.ranks[static_cast<size_t>(op.peer)].gpu});
  for (size_t c = 0; c < plan.match.calls.size(); ++c)
    for (const auto& x : cost::plan_collective(schedule::call_shape_key(s, plan.match.calls[c])))
      pairs.insert({gpu(plan.match.calls[c][static_cast<size_t>(x.src)]), gpu(plan.match.calls[c][static_cast<size_t>(x.dst)])});
  for (auto [a, b] : pairs)
    if (a != b) topo.route(a, b);
  const double routes = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto times = engine::run_simgrid(s, plan, topo, m);
  const double sg = seconds_since(t0);
  double makespan = 0;
  for (double end : times.end) makespan = std::max(makespan, end);
  std::printf("\nattention_fwd, stripe, cp=512 on 64 nodes: %zu ops, %zu GPU pairs\n", s.ops.size(), pairs.size());
  std::printf("%-38s %10.3f\n", "generate schedule", gen);
  std::printf("%-38s %10.3f\n", "routes of those pairs (Topology)", routes);
  std::printf("%-38s %10.3f   %.2f us per op\n", "run_simgrid (op times)", sg, 1e6 * sg / double(s.ops.size()));
  std::printf("predicted makespan %.6f s\n", makespan);
  return 0;
}
