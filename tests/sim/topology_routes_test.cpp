// The closed-form routes (Topology::route) against the original Dijkstra router
// (reference_route) for every GPU pair: every shipped cluster, small variants of
// each fabric and intra-node kind, and random clusters. Any difference in link
// ids, their order, bottleneck, latency, inter_node or slowest class fails.
#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "sim/config/config_store.hpp"
#include "sim/topology/shortest_path.hpp"
#include "sim/topology/topology.hpp"

namespace rm::topology {
namespace {

Cluster cluster(const std::string& name) {
  auto c = ConfigStore().load("clusters", name, "test");
  return parse_cluster(JsonReader(c.json, c.source));
}

std::string describe(const Cluster& c) {
  return fmt::format("{} nodes={} gpn={} intra={} nics={} fabric={} npl={} spines={} uplink={}", c.name, c.nodes,
                     c.gpus_per_node, c.intra.kind == IntraKind::nvswitch ? "nvswitch" : "mesh", c.nics_per_node,
                     int(c.fabric.kind), c.fabric.nodes_per_leaf, c.fabric.spines, c.fabric.uplink_bandwidth_GBps);
}

void expect_same(const Topology& t, int a, int b, const std::string& what) {
  const Route want = reference_route(t, a, b);
  const Route got = t.route(a, b);
  ASSERT_EQ(t.compute_route(a, b).links, got.links) << what << " uncached " << a << " -> " << b;
  ASSERT_EQ(got.links, want.links) << what << " route " << a << " -> " << b;
  // Bit-identical doubles: the same additions in the same order.
  ASSERT_EQ(got.bottleneck_GBps, want.bottleneck_GBps) << what << " " << a << " -> " << b;
  ASSERT_EQ(got.latency_us, want.latency_us) << what << " " << a << " -> " << b;
  ASSERT_EQ(got.inter_node, want.inter_node) << what << " " << a << " -> " << b;
  ASSERT_EQ(got.slowest, want.slowest) << what << " " << a << " -> " << b;
}

// Intra-node two-hop routes by the vertex they pass: the host or a NIC.
struct Detours {
  int via_host = 0, via_nic = 0;
};

Detours expect_all_pairs_match(const Cluster& c) {
  const Topology t(c);
  Detours d;
  for (int a = 0; a < t.gpus(); ++a)
    for (int b = 0; b < t.gpus(); ++b) {
      expect_same(t, a, b, describe(c));
      if (::testing::Test::HasFatalFailure()) return d;
      const Route r = t.route(a, b);
      if (r.inter_node || r.links.size() != 2) continue;
      const std::string& mid = t.vertex_name(t.links()[size_t(r.links[0])].to);
      if (mid.find("/host") != std::string::npos) ++d.via_host;
      if (mid.find("/nic") != std::string::npos) ++d.via_nic;
    }
  return d;
}

TEST(TopologyRoutes, EveryShippedClusterEveryPair) {
  for (const char* name : {"a100-40g-4x8-hdr", "a100-80g-1x8", "a100-80g-8x8-hdr", "a800-80g-2x8", "h100-8x8-ndr",
                           "h200-1x8", "h800-1x8", "v100-dgx1-1x8"}) {
    SCOPED_TRACE(name);
    expect_all_pairs_match(cluster(name));
    if (HasFatalFailure()) return;
  }
}

// Fabrics on small clusters: every NIC count, leaf/spine with several spines,
// leaves of one or two nodes and oversubscribed uplinks, rails with spines.
TEST(TopologyRoutes, SmallFabricVariantsEveryPair) {
  for (const char* base : {"a100-40g-4x8-hdr", "h100-8x8-ndr", "a100-80g-8x8-hdr"})
    for (int nodes : {2, 3})
      for (int nics : {1, 2, 4, 8})
        for (int spines : {1, 2, 3}) {
          Cluster c = cluster(base);
          c.nodes = nodes;
          c.nics_per_node = nics;
          if (c.fabric.kind != FabricKind::single_switch) c.fabric.spines = spines;
          if (c.fabric.kind == FabricKind::leaf_spine) c.fabric.nodes_per_leaf = spines == 3 ? 2 : 1;
          if (spines == 2) c.fabric.uplink_bandwidth_GBps = 6.25;  // oversubscribed: slower than the NICs
          expect_all_pairs_match(c);
          if (HasFatalFailure()) return;
        }
}

// DGX-1 hybrid cube mesh on several nodes: pairs without NVLink go over PCIe,
// through the host or (equally fast) through a shared NIC -- the tie the
// intra-node table must settle exactly as Dijkstra does.
TEST(TopologyRoutes, MeshWithoutFullNvlinkEveryPair) {
  Detours all;
  for (FabricKind kind : {FabricKind::single_switch, FabricKind::leaf_spine, FabricKind::rail_optimized})
    for (int nodes : {1, 2, 3})
      for (int nics : {1, 2, 4, 8})
        for (double nvlink_GBps : {25.0, 4.0}) {  // 4 GB/s: slower than the PCIe detour for single links
          Cluster c = cluster("v100-dgx1-1x8");
          c.nodes = nodes;
          c.nics_per_node = nics;
          c.intra.bandwidth_GBps = nvlink_GBps;
          c.fabric.kind = kind;
          c.fabric.nodes_per_leaf = 2;
          c.fabric.spines = 2;
          c.fabric.uplink_bandwidth_GBps = 25;
          const Detours d = expect_all_pairs_match(c);
          if (HasFatalFailure()) return;
          all.via_host += d.via_host, all.via_nic += d.via_nic;
        }
  // Dijkstra settles the host-or-NIC tie both ways across these shapes, so the
  // table is checked on each outcome.
  EXPECT_GT(all.via_host, 0);
  EXPECT_GT(all.via_nic, 0);
}

// Random shapes and speeds, including NVSwitches slower than PCIe and meshes
// with random link sets, so ties and detours fall in unusual places.
TEST(TopologyRoutes, RandomClustersEveryPair) {
  std::mt19937 rng(9);
  auto pick = [&](std::initializer_list<double> v) { return v.begin()[rng() % v.size()]; };
  for (int trial = 0; trial < 60; ++trial) {
    Cluster c = cluster("a100-40g-4x8-hdr");
    c.name = fmt::format("random{}", trial);
    c.nodes = 1 + int(rng() % 4);
    c.gpus_per_node = int(pick({2, 4, 8}));
    std::vector<int> divisors;
    for (int d = 1; d <= c.gpus_per_node; ++d)
      if (c.gpus_per_node % d == 0) divisors.push_back(d);
    c.nics_per_node = divisors[rng() % divisors.size()];
    c.intra.kind = rng() % 2 ? IntraKind::nvswitch : IntraKind::mesh;
    c.intra.bandwidth_GBps = pick({2, 12, 25, 300});
    c.intra.latency_us = pick({0.5, 2});
    c.intra.links.clear();
    if (c.intra.kind == IntraKind::mesh)
      for (int a = 0; a < c.gpus_per_node; ++a)
        for (int b = a + 1; b < c.gpus_per_node; ++b)
          if (rng() % 2) c.intra.links.push_back({a, b, 1 + int(rng() % 2)});
    c.pcie = {pick({12, 25, 50}), pick({1, 1.5})};
    c.nic = {pick({12.5, 25, 50}), pick({2, 5})};
    c.fabric.kind = FabricKind(rng() % 3);
    c.fabric.switch_latency_us = pick({0.25, 0.5});
    c.fabric.nodes_per_leaf = 1 + int(rng() % 3);
    c.fabric.spines = 1 + int(rng() % 4);
    c.fabric.uplink_bandwidth_GBps = pick({6.25, 25, 50});
    expect_all_pairs_match(c);
    if (HasFatalFailure()) return;
  }
}

// The 4,096-GPU cluster (512 nodes of the default cluster, and leaf/spine and
// rails at that size): a fixed random sample of pairs, since one reference
// route costs a Dijkstra over ~35K links.
TEST(TopologyRoutes, FourThousandGpusSampledPairs) {
  for (const char* name : {"a100-40g-4x8-hdr", "h100-8x8-ndr", "a100-80g-8x8-hdr"}) {
    Cluster c = cluster(name);
    c.nodes = 512;
    const Topology t(c);
    ASSERT_EQ(t.gpus(), 4096);
    std::mt19937 rng(4096);
    for (int i = 0; i < 24; ++i) {
      const int a = int(rng() % 4096), b = i % 4 == 0 ? (a / 8) * 8 + int(rng() % 8) : int(rng() % 4096);
      expect_same(t, a, b, name);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(TopologyRoutes, NoSpinesBetweenLeavesHasNoRoute) {
  Cluster c = cluster("h100-8x8-ndr");
  c.fabric.spines = 0;  // not a valid config file, but a valid struct: both routers refuse alike
  const Topology t(c);
  EXPECT_THROW(t.route(0, 32), std::runtime_error);
  EXPECT_THROW(t.route(0, 32), std::runtime_error);  // a failed route is not kept
  EXPECT_THROW(reference_route(t, 0, 32), std::runtime_error);
  expect_same(t, 0, 8, "same leaf");
}

}  // namespace
}  // namespace rm::topology

namespace rm::topology {
namespace {

// References from route() survive later calls (the analytic engine keeps them).
TEST(TopologyRoutes, CachedRoutesStayPut) {
  Cluster c = cluster("a100-40g-4x8-hdr");
  const Topology t(c);
  const Route& first = t.route(0, 9);
  const std::vector<int> links = first.links;
  for (int a = 0; a < t.gpus(); ++a)
    for (int b = 0; b < t.gpus(); ++b) t.route(a, b);
  EXPECT_EQ(&first, &t.route(0, 9));
  EXPECT_EQ(first.links, links);
}

// Topology::key names every field the topology depends on, and nothing else.
TEST(TopologyRoutes, KeySeparatesTopologiesOnly) {
  const Cluster base = cluster("v100-dgx1-1x8");
  Cluster cost_only = base;
  cost_only.name = "other";
  cost_only.gpu.peak_tflops_bf16 *= 2;
  cost_only.cost.network_efficiency = 0.5;
  EXPECT_EQ(Topology::key(base), Topology::key(cost_only));
  std::vector<Cluster> changed(12, base);
  changed[0].nodes = 2;
  changed[1].gpus_per_node = 4, changed[1].intra.links.resize(3);
  changed[2].intra.kind = IntraKind::nvswitch;
  changed[3].intra.bandwidth_GBps = 26;
  changed[4].intra.latency_us = 2.5;
  changed[5].intra.links[3].count = 1;
  changed[6].nics_per_node = 2;
  changed[7].pcie.latency_us = 1.25;
  changed[8].nic.bandwidth_GBps = 13;
  changed[9].fabric.kind = FabricKind::leaf_spine;
  changed[10].fabric.spines = 3;
  changed[11].fabric.uplink_bandwidth_GBps = 7;
  for (size_t i = 0; i < changed.size(); ++i) EXPECT_NE(Topology::key(changed[i]), Topology::key(base)) << i;
}

}  // namespace
}  // namespace rm::topology
