#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/topology/topology.hpp"

namespace rm::topology {
namespace {

Cluster cluster(const std::string& name) {
  auto c = ConfigStore().load("clusters", name, "test");
  return parse_cluster(JsonReader(c.json, c.source));
}

TEST(Topology, A100NodeUsesNvSwitch) {
  Topology t(cluster("a100-40g-4x8-hdr"));
  EXPECT_EQ(t.gpus(), 32);
  const Route& r = t.route(0, 1);
  ASSERT_EQ(r.links.size(), 2u);  // gpu -> nvswitch -> gpu
  EXPECT_DOUBLE_EQ(r.bottleneck_GBps, 300);
  EXPECT_DOUBLE_EQ(r.latency_us, 2.0);
  EXPECT_FALSE(r.inter_node);
  EXPECT_EQ(r.slowest, LinkClass::nvlink);
}

TEST(Topology, A100CrossNodeGoesThroughNicsAndSwitch) {
  Topology t(cluster("a100-40g-4x8-hdr"));
  const Route& r = t.route(3, 11);  // node 0 gpu 3 -> node 1 gpu 3
  // gpu -pcie-> nic -net-> switch -net-> nic -pcie-> gpu
  ASSERT_EQ(r.links.size(), 4u);
  EXPECT_DOUBLE_EQ(r.bottleneck_GBps, 25.0);  // min(PCIe 25 GB/s, HDR 200 Gb/s = 25 GB/s)
  // pcie 1 + (nic 2 + switch 0.25) * 2 + pcie 1
  EXPECT_NEAR(r.latency_us, 6.5, 1e-9);
  EXPECT_TRUE(r.inter_node);
  EXPECT_EQ(t.links()[size_t(r.links[0])].name, "n0/gpu3->n0/nic3");
  EXPECT_EQ(t.links()[size_t(r.links[3])].name, "n1/nic3->n1/gpu3");
}

TEST(Topology, RingOrderHops) {
  Topology t(cluster("a100-40g-4x8-hdr"));
  std::vector<int> seq(32);
  for (int i = 0; i < 32; ++i) seq[size_t(i)] = i;
  EXPECT_EQ(t.ring_inter_node_hops(seq), 4);  // 7->8, 15->16, 23->24, 31->0
  std::vector<int> strided;
  for (int l = 0; l < 8; ++l)
    for (int n = 0; n < 4; ++n) strided.push_back(n * 8 + l);
  EXPECT_EQ(t.ring_inter_node_hops(strided), 32);  // every hop leaves the node
  EXPECT_EQ(t.ring_inter_node_hops({0, 1, 2}), 0);
}

TEST(Topology, DgxOneMeshHasDoubleLinksAndPcieFallback) {
  Topology t(cluster("v100-dgx1-1x8"));
  EXPECT_DOUBLE_EQ(t.route(0, 3).bottleneck_GBps, 50);  // two NVLinks
  EXPECT_DOUBLE_EQ(t.route(0, 1).bottleneck_GBps, 25);  // one NVLink
  EXPECT_EQ(t.route(0, 1).links.size(), 1u);
  const Route& far = t.route(0, 5);                     // no NVLink between 0 and 5
  EXPECT_EQ(far.links.size(), 2u);                      // gpu -> host -> gpu, never via another GPU
  EXPECT_EQ(far.slowest, LinkClass::pcie);
  EXPECT_DOUBLE_EQ(far.bottleneck_GBps, 12);
  EXPECT_DOUBLE_EQ(far.latency_us, 3.0);
  // Four NICs, each shared by a GPU pair.
  EXPECT_EQ(t.gpus_sharing_nic(2), (std::vector<int>{2, 3}));
  EXPECT_EQ(t.nic_of(7), 3);
}

TEST(Topology, LeafSpineCrossesSpineOnlyBetweenLeaves) {
  Topology t(cluster("h100-8x8-ndr"));  // 4 nodes per leaf
  EXPECT_EQ(t.route(0, 8).links.size(), 4u);    // same leaf
  EXPECT_EQ(t.route(0, 32).links.size(), 6u);   // leaf -> spine -> leaf
  EXPECT_DOUBLE_EQ(t.route(0, 32).bottleneck_GBps, 50);  // PCIe 50 GB/s = NDR 400 Gb/s
  EXPECT_THROW(t.route(0, 64), std::out_of_range);
}

TEST(Topology, RailOptimisedCrossRailUsesSpine) {
  Topology t(cluster("a100-80g-8x8-hdr"));
  EXPECT_EQ(t.route(0, 8).links.size(), 4u);   // both on rail 0
  EXPECT_EQ(t.route(0, 9).links.size(), 6u);   // rail 0 -> spine -> rail 1
  // Every route is symmetric in latency.
  for (int a = 0; a < 64; a += 7)
    for (int b = 0; b < 64; b += 5) EXPECT_DOUBLE_EQ(t.route(a, b).latency_us, t.route(b, a).latency_us);
}

TEST(Topology, SingleNodeNeedsNoNetwork) {
  Topology t(cluster("h200-1x8"));
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a != b) {
        EXPECT_EQ(t.route(a, b).slowest, LinkClass::nvlink);
      }
    }
  EXPECT_TRUE(t.route(2, 2).links.empty());
}

}  // namespace
}  // namespace rm::topology
