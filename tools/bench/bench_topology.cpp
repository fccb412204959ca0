// Topology construction and routing at scale: build times for 32, 512 and 4,096
// GPUs (the default cluster a100-40g-4x8-hdr with more nodes, and its
// leaf/spine and rail-optimised cousins at 4,096), the time to route every
// (src, dst) pair of a 4,096-rank ring (both directions) and of 100,000 random
// pairs (route(), which keeps them, and compute_route(), which does not), one
// reference Dijkstra route for scale, and memory (Topology bytes and the
// peak-RSS growth of the constructions). One run, one table.
//   build/bin/bench_topology
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include <fmt/format.h>

#include "sim/config/config_store.hpp"
#include "sim/topology/shortest_path.hpp"
#include "sim/topology/topology.hpp"

namespace {
using namespace rm;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}
Cluster cluster(const std::string& name, int nodes) {
  auto cfg = ConfigStore().load("clusters", name, "bench");
  Cluster c = parse_cluster(JsonReader(cfg.json, cfg.source));
  c.nodes = nodes;
  return c;
}
// Sums something of every route so the work cannot be optimised away.
double checksum = 0;
void use(const topology::Route& r) { checksum += r.latency_us + double(r.links.size()); }
}  // namespace

int main() {
  fmt::print("{:<44} {:>12}\n", "figure", "value");
  const long rss0 = peak_rss_kb();
  for (const char* name : {"a100-40g-4x8-hdr", "h100-8x8-ndr", "a100-80g-8x8-hdr"})
    for (int nodes : {4, 64, 512}) {
      if (std::string(name) != "a100-40g-4x8-hdr" && nodes != 512) continue;
      const Cluster c = cluster(name, nodes);
      const auto t0 = clock_type::now();
      const topology::Topology t(c);
      const double s = seconds_since(t0);
      fmt::print("{:<44} {:>9.2f} ms\n", fmt::format("construct {} GPUs ({})", t.gpus(), name), s * 1e3);
      fmt::print("{:<44} {:>9.2f} MB\n", fmt::format("  Topology bytes, {} links", t.links().size()),
                 double(t.memory_bytes()) / 1e6);
    }
  const long rss1 = peak_rss_kb();

  const topology::Topology t(cluster("a100-40g-4x8-hdr", 512));
  const int n = t.gpus();
  const size_t bytes0 = t.memory_bytes();
  auto t0 = clock_type::now();
  for (int r = 0; r < n; ++r) {
    use(t.route(r, (r + 1) % n));
    use(t.route((r + 1) % n, r));
  }
  double s = seconds_since(t0);
  fmt::print("{:<44} {:>9.2f} ms\n", fmt::format("route() 4,096-rank ring, {} pairs, first", 2 * n), s * 1e3);
  fmt::print("{:<44} {:>9.2f} MB\n", "  Topology bytes added by those routes", double(t.memory_bytes() - bytes0) / 1e6);
  t0 = clock_type::now();
  for (int r = 0; r < n; ++r) {
    use(t.route(r, (r + 1) % n));
    use(t.route((r + 1) % n, r));
  }
  s = seconds_since(t0);
  fmt::print("{:<44} {:>9.2f} ms\n", "route() the same ring again (kept)", s * 1e3);

  for (bool kept : {false, true}) {
    std::mt19937 rng(1);
    t0 = clock_type::now();
    for (int i = 0; i < 100000; ++i) {
      const int a = int(rng() % unsigned(n)), b = int(rng() % unsigned(n));
      if (kept) use(t.route(a, b));
      else use(t.compute_route(a, b));
    }
    s = seconds_since(t0);
    fmt::print("{:<44} {:>9.2f} ms\n", fmt::format("{} 100,000 random pairs", kept ? "route()" : "compute_route()"),
               s * 1e3);
    fmt::print("{:<44} {:>9.1f} ns\n", "  per route", s / 100000 * 1e9);
  }
  fmt::print("{:<44} {:>9.2f} MB\n", "Topology bytes with ring + 100,000 pairs kept", double(t.memory_bytes()) / 1e6);

  t0 = clock_type::now();
  for (int i = 0; i < 10; ++i) use(topology::reference_route(t, i, n - 1 - i));
  s = seconds_since(t0);
  fmt::print("{:<44} {:>9.2f} ms\n", "reference Dijkstra, one pair (old per-pair)", s / 10 * 1e3);
  fmt::print("{:<44} {:>9} KB\n", "peak RSS growth over all constructions", rss1 - rss0);
  fmt::print("{:<44} {:>12.0f}\n", "checksum", checksum);
  return 0;
}
