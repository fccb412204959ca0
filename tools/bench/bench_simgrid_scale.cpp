// The SimGrid engine's own cost per op as the cluster grows: a synthetic ring
// (compute overlapped with a neighbour exchange, 3 ops per rank and step, about
// 100K ops at every size) on a100-80g-8x8-hdr widened to 4 .. 64 nodes, timed
// around run_simgrid alone (platform build, fork, simulation, op times back;
// no schedule generation, no Timeline). The ring's routes are computed (and
// cached in the Topology) before the clock starts and timed apart, so the
// SimGrid column is SimGrid's own share. Prints one row per size, measured in
// one run; best of 3 to damp the noise of shared cores.
//   build/bin/bench_simgrid_scale
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "sim/config/config_store.hpp"
#include "sim/engine/simgrid_engine.hpp"
#include "sim/topology/topology.hpp"
#include "tests/support/synthetic_schedules.hpp"

int main() {
  using namespace rm;
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
  return 0;
}
