#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sim/config/config_store.hpp"
#include "sim/cost/collective_plan.hpp"
#include "sim/cost/cost_model.hpp"

namespace rm::cost {
namespace {

using schedule::OpKind;

Cluster a100() {
  auto c = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
  return parse_cluster(JsonReader(c.json, c.source));
}

// An op of kind k with these costs, its entry added to s.
schedule::Op op(schedule::Schedule& s, OpKind k, double flops, int64_t blocks = 0, int64_t bytes = 0) {
  schedule::Op o;
  o.kind = k;
  s.set_desc(o, {flops, blocks, 0, bytes});
  return o;
}

// a100-40g-4x8-hdr: 312 TFLOP/s; gemm 0.65; HBM 1555 GB/s at 0.70; launch 5 us;
// nvlink 300 GB/s x 0.80, 1+1 us per route. Attention: MTraining's block_sparse table.
CostModel a100_model(const Cluster& c) { return CostModel(c, load_attention_kernel(ConfigStore(), "block_sparse", c.gpu)); }

TEST(CostModel, GemmAndIndexBuildAreFlopsOverTheGemmRatePlusLaunch) {
  CostModel m = a100_model(a100());
  schedule::Schedule s;
  EXPECT_NEAR(m.compute_seconds(s, op(s, OpKind::gemm, 312e12 * 0.65 * 1e-3)), 1e-3 + 5e-6, 1e-12);
  EXPECT_NEAR(m.compute_seconds(s, op(s, OpKind::index_build, 312e12 * 0.65 * 2e-3)), 2e-3 + 5e-6, 1e-12);
}

TEST(CostModel, AttentionSecondsIsComputeSecondsWithoutAnOp) {
  // One attention-seconds path: for random attention ops, the Op-free entry point
  // (what `imbalance` charges) equals compute_seconds, and a tile kernel's time
  // is its executed tiles (or its allowed pairs, when larger) at the table's rate.
  CostModel m = a100_model(a100());
  schedule::Schedule s;
  const double per_tile = 4.0 * 128 * 64 * 128;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> fill(0.0, 1.2);
  for (int trial = 0; trial < 500; ++trial) {
    const bool bwd = trial % 2 == 1;
    const int64_t blocks = int64_t(rng() % 100000);
    const double ratio = bwd ? 2.5 : 1.0;
    const double flops = fill(rng) * double(blocks) * per_tile * ratio;
    schedule::Op o = op(s, bwd ? OpKind::attn_bwd : OpKind::attn_fwd, flops, blocks);
    s.descs[size_t(o.desc)].tokens = int64_t(rng() % 40000);
    const AttentionCall a = CostModel::attention_call(s, o);
    ASSERT_EQ(m.attention_seconds(a), m.compute_seconds(s, o)) << trial;
    const double rate = m.attention_tflops(bwd, true, double(s.desc(o).tokens)) * 1e12;
    EXPECT_NEAR(m.compute_seconds(s, o), 5e-6 + std::max(flops, double(blocks) * per_tile * ratio) / rate,
                1e-12 * m.compute_seconds(s, o));
  }
}

TEST(CostModel, ElementwiseIsARooflineOverHbm) {
  CostModel m = a100_model(a100());
  schedule::Schedule s;
  const int64_t bytes = static_cast<int64_t>(1555e9 * 0.70 * 1e-3);
  EXPECT_NEAR(m.compute_seconds(s, op(s, OpKind::elementwise, 1e6, 0, bytes)), 1e-3 + 5e-6, 1e-9);
  EXPECT_NEAR(m.compute_seconds(s, op(s, OpKind::elementwise, 0)), 5e-6, 1e-15);
}

TEST(CostModel, TransferUsesRouteLatencyAndSlowestEffectiveLink) {
  Cluster c = a100();
  topology::Topology t(c);
  CostModel m = a100_model(c);
  EXPECT_NEAR(m.transfer_seconds(t, 0, 1, 240e6), 2e-6 + 1e-3, 1e-12);  // NVSwitch: 300 x 0.8 GB/s
  // Across nodes: gpu -pcie-> nic -net-> switch -net-> nic -pcie-> gpu; PCIe 25 x 0.8 < HDR 25 x 0.85.
  const topology::Route& r = t.route(0, 8);
  EXPECT_NEAR(m.transfer_seconds(t, 0, 8, 20e6), r.latency_us * 1e-6 + 1e-3, 1e-12);
  EXPECT_NEAR(m.transfer_seconds(t, 3, 3, 1e6), 1e6 / (1555e9 * 0.7 / 2), 1e-15);  // same GPU: a copy
}

TEST(CostModel, RingAllReduceIsTwoNMinusOneStepsOfOneNth) {
  const auto plan = plan_collective(OpKind::all_reduce, 4, 4e6);
  ASSERT_EQ(plan.size(), 2u * 3u * 4u);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].dst, (plan[i].src + 1) % 4);
    EXPECT_DOUBLE_EQ(plan[i].bytes, 1e6);
    if (i < 4) EXPECT_EQ(plan[i].deps[0], -1);
    else for (int32_t d : plan[i].deps) EXPECT_LT(d, static_cast<int32_t>(i));
  }
  // busbw reasoning: 2(n-1)/n of the buffer crosses each ring link
  EXPECT_DOUBLE_EQ(collective_seconds(OpKind::all_reduce, 4, 4e6, 1e-6, 1e9), 6 * (1e-6 + 1e-3));
  EXPECT_DOUBLE_EQ(collective_seconds(OpKind::all_gather, 4, 4e6, 1e-6, 1e9), 3 * (1e-6 + 1e-3));
}

TEST(CostModel, AllToAllSendsOneNthToEveryOtherMember) {
  const auto plan = plan_collective(OpKind::all_to_all, 5, 5e6);
  std::map<std::pair<int, int>, int> seen;
  for (const auto& x : plan) {
    EXPECT_NE(x.src, x.dst);
    EXPECT_DOUBLE_EQ(x.bytes, 1e6);
    ++seen[{x.src, x.dst}];
  }
  EXPECT_EQ(seen.size(), 20u);
  for (auto [pair, count] : seen) EXPECT_EQ(count, 1);
}

TEST(CostModel, BroadcastPipelinesTheWholeBufferToEveryMember) {
  const double bytes = 4.0 * kBroadcastChunkBytes;
  const auto plan = plan_collective(OpKind::broadcast, 4, bytes, 2);
  std::map<int, double> received;
  for (const auto& x : plan) received[x.dst] += x.bytes;
  EXPECT_EQ(received.size(), 3u);
  EXPECT_EQ(received.count(2), 0u);  // the root receives nothing
  for (auto [m, b] : received) EXPECT_DOUBLE_EQ(b, bytes);
  // 4 chunks through 3 hops: 4 + 3 - 1 chunk steps
  EXPECT_DOUBLE_EQ(collective_seconds(OpKind::broadcast, 4, bytes, 0, 1.0), 6 * kBroadcastChunkBytes);
}

TEST(CostModel, SingleMemberCollectiveMovesNothing) {
  EXPECT_TRUE(plan_collective(OpKind::all_reduce, 1, 1e6).empty());
  EXPECT_THROW(plan_collective(OpKind::gemm, 4, 1e6), std::invalid_argument);
}

}  // namespace
}  // namespace rm::cost
