// Generators at layer and step scope: checkpoint policies, the hierarchical
// ring's outer-before-inner order, data-parallel
// collectives, and the default experiment's shape.
#include <algorithm>

#include <gtest/gtest.h>

#include "sim/pipeline/pipeline.hpp"
#include "sim/placement/device_map.hpp"
#include "tests/support/generate_support.hpp"

namespace rm::generate {
namespace {

using schedule::OpKind;
using schedule::Phase;
using testing::count;
using testing::small_experiment;

int recompute_ops(const schedule::Schedule& s, int rank, bool comm) {
  int n = 0;
  for (const auto& op : s.ops)
    if (op.rank == rank && op.phase == Phase::recompute && is_compute(op.kind) != comm) ++n;
  return n;
}

constexpr int kDenseOpsPerLayerForward = 7;  // norm, QKV, O, norm, gate+up, SwiGLU, down

TEST(Checkpoint, PoliciesChangeWhatIsRecomputed) {
  const std::vector<std::string> base{"parallel.cp=4", "parallel.hp=2", "scope=layer"};
  auto make = [&](std::string ck) {
    auto o = base;
    o.push_back("parallel.checkpoint=" + ck);
    auto e = small_experiment(o);
    return testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  };
  auto none = make("none"), full = make("full"), selective = make("selective");
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(recompute_ops(none.s, r, false) + recompute_ops(none.s, r, true), 0);
    // Full: the whole forward again, its 4 ring steps and 3 merges, 3 K/V transfers and 2 all-to-alls included.
    EXPECT_EQ(recompute_ops(full.s, r, false), kDenseOpsPerLayerForward + 4 + 3);
    EXPECT_EQ(count(full.s, r, OpKind::attn_fwd, int(Phase::recompute)), 4);
    EXPECT_EQ(recompute_ops(full.s, r, true), 3 + 3 + 2);
    // Selective checkpoint++: dense ops only, no attention and no communication.
    EXPECT_EQ(recompute_ops(selective.s, r, false), kDenseOpsPerLayerForward);
    EXPECT_EQ(recompute_ops(selective.s, r, true), 0);
    EXPECT_EQ(count(selective.s, r, OpKind::attn_fwd, int(Phase::recompute)), 0);
  }
  // After a selective recomputation the backward exchanges carry Q, K, V again.
  auto a2a_in_bytes = [](const schedule::Schedule& s) {
    for (const auto& op : s.ops)
      if (op.phase == Phase::backward && op.kind == OpKind::all_to_all) return s.desc(op).bytes;
    return int64_t(-1);
  };
  EXPECT_GT(a2a_in_bytes(selective.s), a2a_in_bytes(full.s));
}

TEST(HierarchicalRing, OuterTransferPostedBeforeTheInnerRingAndAwaitedAfter) {
  auto e = small_experiment({"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical",
                             "scope=attention_fwd"});
  auto g = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern()));
  EXPECT_EQ(g.s.generator, "stripe-hierarchical");
  const int inner = e.cluster.gpus_per_node;  // 8 GPUs per node: 2 rounds of 8 steps
  for (int r = 0; r < 16; ++r) {
    const auto& streams = g.s.ranks[size_t(r)].streams;
    auto stream_named = [&](const std::string& n) {
      return int(std::find_if(streams.begin(), streams.end(), [&](const auto& s) { return s.name == n; }) -
                 streams.begin());
    };
    const int outer_stream = stream_named("kv_outer"), inner_stream = stream_named("kv_inner");
    EXPECT_EQ(streams[size_t(outer_stream)].kind, schedule::StreamKind::comm_inter);
    EXPECT_EQ(streams[size_t(inner_stream)].kind, schedule::StreamKind::comm_intra);
    schedule::OpId outer_send = -1, outer_recv = -1, first_inner = -1, round2_compute = -1;
    int inner_sends = 0;
    for (const auto& op : g.s.ops) {
      if (op.rank != r) continue;
      if (op.stream == outer_stream && op.kind == OpKind::send) outer_send = op.id;
      if (op.stream == outer_stream && op.kind == OpKind::recv) outer_recv = op.id;
      if (op.stream == inner_stream && op.kind == OpKind::send) {
        ++inner_sends;
        if (first_inner < 0) first_inner = op.id;
        EXPECT_TRUE(g.topo.same_node(r, op.peer));
      }
      if (op.kind == OpKind::attn_fwd && op.step == inner) round2_compute = op.id;
    }
    EXPECT_EQ(inner_sends, 2 * (inner - 1));
    EXPECT_LT(outer_send, first_inner);
    EXPECT_FALSE(g.topo.same_node(r, g.s.ops[size_t(outer_send)].peer));
    const auto& deps = g.s.ops[size_t(round2_compute)].deps;
    EXPECT_NE(std::find(deps.begin(), deps.end(), outer_recv), deps.end());
  }
}

TEST(HierarchicalRing, BackwardCarriesDkvInnerEveryStepAndOuterEveryRound) {
  auto e = small_experiment({"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical",
                             "scope=attention_fwd_bwd"});
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  // Backward: 16 computes; K/V 14 inner + 1 outer; dK/dV 16 inner + 2 outer.
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(count(g.s, r, OpKind::attn_bwd), 16);
    EXPECT_EQ(count(g.s, r, OpKind::send, int(Phase::backward)), 15 + 18);
  }
}

TEST(Step, GradientCollectivesFollowZeroStage) {
  for (int zero : {0, 1, 3}) {
    auto e = small_experiment({"parallel.dp=2", "parallel.cp=4", "scope=step",
                               "parallel.zero_stage=" + std::to_string(zero)});
    auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
    const int layers = e.model.layers, collectives = layers + 1;  // one per layer, one for the embeddings
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(count(g.s, r, OpKind::all_reduce), zero == 0 ? collectives : 0);
      EXPECT_EQ(count(g.s, r, OpKind::reduce_scatter), zero == 0 ? 0 : collectives);
      // ZeRO 1/2: gather the updated parameters once; ZeRO 3: before every forward and backward.
      EXPECT_EQ(count(g.s, r, OpKind::all_gather), zero == 0 ? 0 : zero == 3 ? layers * 2 + 1 : collectives);
      EXPECT_EQ(count(g.s, r, OpKind::elementwise, int(Phase::optimizer)), 1);
    }
  }
}

TEST(Step, BalancedPartitionUsesTheSparsityAwarePartition) {
  auto e = small_experiment({"parallel.cp=4", "parallel.partition=balanced", "scope=attention_fwd"});
  auto g = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern()));
  EXPECT_EQ(g.s.generator, "balanced-ring");
  EXPECT_EQ(count(g.s, 0, OpKind::all_to_all), 3);
}

// The default experiment (cp = 32 over 4 nodes, hierarchical ring, 512K tokens,
// top-p pattern) cut to 4 layers so the test stays fast under ASan; the full
// step's generation time is measured outside the test suite.
TEST(Step, DefaultExperimentShape) {
  auto e = load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", {"model.layers=4"});
  auto m = pipeline::build_patterns(e);
  topology::Topology topo(e.cluster);
  auto s = generate_step(e, m, topo);
  EXPECT_EQ(s.generator, "stripe-hierarchical");
  EXPECT_EQ(int(s.ranks.size()), 32);
  EXPECT_EQ(count(s, 0, OpKind::attn_bwd), 4 * 32);
  EXPECT_EQ(count(s, 0, OpKind::attn_fwd), 2 * 4 * 32);  // forward + full recomputation
  // Top-p indices are built online in every forward and recomputation; rank 0 is
  // the gather root: 7 kernels everywhere plus its two top-k (index_building_test.cpp);
  // every backward converts the block mask once more.
  EXPECT_EQ(count(s, 0, OpKind::index_build), 2 * 4 * 9 + 4);
}

// A step generated without accesses (for runs that only simulate it) is the
// whole Schedule less what ops read and write and the buffers they name: op for
// op the same otherwise, and valid as a costable-only Schedule.
TEST(Step, WithoutAccessesIsTheWholeStepLessItsData) {
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"model.layers=2"},  // the default: hierarchical stripe ring, top-p indices built online
           {"model.layers=2", "parallel.cp=8", "parallel.dp=4", "parallel.zero_stage=1"},
           {"model.layers=2", "parallel.cp=4", "parallel.tp=2", "parallel.dp=2", "parallel.zero_stage=3"},
           {"model.layers=2", "parallel.cp=8", "parallel.hp=4", "parallel.ring=double_ring", "parallel.window=2"}}) {
    SCOPED_TRACE(sets.back());
    auto e = load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", sets);
    auto m = pipeline::build_patterns(e);
    topology::Topology topo(e.cluster);
    for (const Replicas r : {Replicas::all, Replicas::one}) {
      if (r == Replicas::one && !replica_refusal(e, topo).empty()) continue;
      const auto whole = generate_step(e, m, topo, nullptr, r);
      const auto lean = generate_step(e, m, topo, nullptr, r, Accesses::none);
      ASSERT_FALSE(whole.accesses.empty());
      ASSERT_FALSE(whole.buffers.empty());
      EXPECT_TRUE(lean.accesses.empty());
      EXPECT_TRUE(lean.buffers.empty());
      testing::expect_ops_without_accesses(whole, lean.ops, lean.descs);
      EXPECT_EQ(lean.ranks, whole.ranks);
      EXPECT_EQ(lean.groups, whole.groups);
      EXPECT_EQ(lean.attentions, whole.attentions);
      EXPECT_EQ(lean.gemms, whole.gemms);
      EXPECT_EQ(lean.token_sets, whole.token_sets);
      EXPECT_EQ(lean.symmetry, whole.symmetry);
    }
  }
}

}  // namespace
}  // namespace rm::generate
