// Generators: every attention kind validates on small cases, moves as many
// bytes as it receives, does exactly the attention work of its pattern, and
// has the op counts its algorithm implies.
#include <algorithm>
#include <map>
#include <numeric>

#include <gtest/gtest.h>

#include "sim/cost/attention_cost.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/placement/token_partition.hpp"
#include "sim/schedule/validate.hpp"
#include "tests/support/generate_support.hpp"

namespace rm::generate {
namespace {

using schedule::OpKind;
using schedule::Phase;
using testing::count;
using testing::small_experiment;

struct Case {
  std::string name;
  std::vector<std::string> overrides;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << ":";
  for (const auto& o : c.overrides) *os << " " << o;
}

const std::vector<Case> kCases{
    {"single_gpu", {}},
    {"ulysses", {"parallel.hp=4"}},
    {"ring", {"parallel.cp=4"}},
    {"zigzag_ring", {"parallel.cp=8", "parallel.partition=zigzag"}},
    {"stripe_ring", {"parallel.cp=8", "parallel.partition=stripe"}},
    {"hierarchical", {"parallel.cp=16", "parallel.partition=stripe", "parallel.ring=hierarchical"}},
    {"2d_double_ring_head_first", {"parallel.hp=2", "parallel.cp=8", "parallel.ring=double_ring", "parallel.window=4",
                                   "parallel.partition=zigzag", "parallel.placement=head_first"}},
    {"2d_double_ring_context_first", {"parallel.hp=2", "parallel.cp=8", "parallel.ring=double_ring",
                                      "parallel.window=4", "parallel.placement=context_first"}},
    {"double_ring_interleaved", {"parallel.cp=8", "parallel.ring=double_ring", "parallel.window=2",
                                 "parallel.placement=interleaved"}},
    {"2d_ring_dp2", {"parallel.dp=2", "parallel.hp=2", "parallel.cp=4", "parallel.partition=zigzag"}},
};

std::vector<std::string> with(std::vector<std::string> v, std::vector<std::string> more) {
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

// Sum of (q + 1) over a rank's tokens: the allowed pairs of a dense causal row set.
double causal_pairs(const sparsity::TokenSet& t) {
  double n = 0;
  for (int64_t q : t.tokens()) n += double(q + 1);
  return n;
}

class EveryGenerator : public ::testing::TestWithParam<Case> {};

TEST_P(EveryGenerator, ValidatesAtEveryScopeAndCheckpoint) {
  for (std::string scope : {"attention_fwd", "attention_fwd_bwd", "layer", "step"})
    for (std::string ck : {"none", "full", "selective"})
      for (bool sparse : {false, true}) {
        auto e = small_experiment(with(GetParam().overrides, {"scope=" + scope, "parallel.checkpoint=" + ck}));
        auto m = testing::model_of(e, sparse ? testing::vertical_slash_pattern() : sparsity::HeadPattern::dense_causal(),
                                   sparse);
        SCOPED_TRACE(scope + " " + ck + (sparse ? " sparse" : " dense"));
        auto g = testing::generate(e, std::move(m));  // build() validates: matching, cycles, deadlock
        EXPECT_TRUE(schedule::check(g.s).empty());
        EXPECT_EQ(int(g.s.ranks.size()), e.parallel.world());
      }
}

TEST_P(EveryGenerator, BytesSentEqualBytesReceivedPerPair) {
  auto e = small_experiment(with(GetParam().overrides, {"scope=step"}));
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  std::map<std::pair<int, int>, int64_t> sent, received;
  for (const auto& op : g.s.ops) {
    if (op.kind == OpKind::send) sent[{op.rank, op.peer}] += g.s.desc(op).bytes;
    if (op.kind == OpKind::recv) received[{op.peer, op.rank}] += g.s.desc(op).bytes;
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent.empty(), e.parallel.cp == 1);
}

TEST_P(EveryGenerator, AttentionFlopsEqualTheDenseCausalFormula) {
  auto e = small_experiment(with(GetParam().overrides, {"scope=attention_fwd_bwd"}));
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  const Parallel& p = e.parallel;
  auto parts = placement::simple_partition(p.partition, e.workload.seq_len, p.cp, p.stripe_tokens);
  placement::DeviceMap map(p);
  const double per_pair = cost::attention_fwd_flops_per_nnz(e.model.head_dim) * e.workload.batch;
  for (int d = 0; d < p.dp; ++d)
    for (int h = 0; h < p.hp; ++h)
      for (int c = 0; c < p.cp; ++c) {
        const int r = map.gpu(d, h, c, 0);
        double fwd = 0, bwd = 0;
        for (const auto& op : g.s.ops) {
          if (op.rank == r && op.kind == OpKind::attn_fwd) fwd += g.s.desc(op).flops;
          if (op.rank == r && op.kind == OpKind::attn_bwd) bwd += g.s.desc(op).flops;
        }
        const double want = causal_pairs(parts[size_t(c)]) * per_pair * (e.model.heads / p.hp);
        EXPECT_DOUBLE_EQ(fwd, want) << "rank " << r;
        EXPECT_DOUBLE_EQ(bwd, want * cost::kAttentionBwdFlopsRatio) << "rank " << r;
      }
}

TEST_P(EveryGenerator, SparseBlocksEqualPairCostTotals) {
  auto e = small_experiment(with(GetParam().overrides, {"scope=attention_fwd"}));
  auto pattern = testing::vertical_slash_pattern();
  auto g = testing::generate(e, testing::model_of(e, pattern));
  const Parallel& p = e.parallel;
  auto parts = placement::simple_partition(p.partition, e.workload.seq_len, p.cp, p.stripe_tokens);
  auto costs = sparsity::pair_costs(pattern, parts, {e.workload.block_q, e.workload.block_k});
  placement::DeviceMap map(p);
  for (int h = 0; h < p.hp; ++h)
    for (int c = 0; c < p.cp; ++c) {
      sparsity::TileCost want;
      for (int k = 0; k < p.cp; ++k) want += costs[size_t(c * p.cp + k)];
      int64_t blocks = 0;
      double flops = 0;
      int steps = 0;
      for (const auto& op : g.s.ops)
        if (op.rank == map.gpu(0, h, c, 0) && op.kind == OpKind::attn_fwd) {
          blocks += g.s.desc(op).blocks;
          flops += g.s.desc(op).flops;
          ++steps;
        }
      const int heads = e.model.heads / p.hp;
      EXPECT_EQ(steps, p.cp);
      EXPECT_EQ(blocks, want.blocks * heads * e.workload.batch);
      EXPECT_DOUBLE_EQ(flops, double(want.nnz) * heads * e.workload.batch *
                                  cost::attention_fwd_flops_per_nnz(e.model.head_dim));
    }
}

INSTANTIATE_TEST_SUITE_P(Generators, EveryGenerator, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(RingGenerator, FourRankForwardHasFourComputesThreeMergesThreeSendsThreeRecvs) {
  auto e = small_experiment({"parallel.cp=4", "scope=attention_fwd"});
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  EXPECT_EQ(g.s.generator, "contiguous-ring");
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(count(g.s, r, OpKind::attn_fwd), 4);
    EXPECT_EQ(count(g.s, r, OpKind::send), 3);
    EXPECT_EQ(count(g.s, r, OpKind::recv), 3);
    EXPECT_EQ(count(g.s, r, OpKind::elementwise), 3);  // the merges of steps 1..3
    EXPECT_EQ(int(std::count_if(g.s.ops.begin(), g.s.ops.end(), [&](const auto& o) { return o.rank == r; })), 13);
  }
}

TEST(RingGenerator, NextKvIsSentBeforeComputingOnTheCurrentOne) {
  auto e = small_experiment({"parallel.cp=4", "scope=attention_fwd"});
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 3; ++k) {
      schedule::OpId send = -1, compute = -1, recv = -1, next_compute = -1;
      for (const auto& op : g.s.ops) {
        if (op.rank != r) continue;
        if (op.step == k && op.kind == OpKind::send) send = op.id;
        if (op.step == k && op.kind == OpKind::recv) recv = op.id;
        if (op.step == k && op.kind == OpKind::attn_fwd) compute = op.id;
        if (op.step == k + 1 && op.kind == OpKind::attn_fwd) next_compute = op.id;
      }
      EXPECT_LT(send, compute);
      EXPECT_NE(g.s.ops[size_t(send)].stream, g.s.ops[size_t(compute)].stream);  // overlapped
      const auto& deps = g.s.ops[size_t(next_compute)].deps;
      EXPECT_NE(std::find(deps.begin(), deps.end(), recv), deps.end());
    }
}

TEST(RingGenerator, BackwardSendsDkvEveryStepAndKvOnAllButTheLast) {
  auto e = small_experiment({"parallel.cp=4", "scope=attention_fwd_bwd"});
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(count(g.s, r, OpKind::attn_bwd), 4);
    EXPECT_EQ(count(g.s, r, OpKind::send, int(Phase::backward)), 3 + 4);
    EXPECT_EQ(count(g.s, r, OpKind::recv, int(Phase::backward)), 3 + 4);
  }
}

TEST(RingGenerator, StripePartitionShufflesInAndOut) {
  auto e = small_experiment({"parallel.cp=4", "parallel.partition=stripe", "scope=attention_fwd"});
  auto g = testing::generate(e, testing::model_of(e, testing::vertical_slash_pattern()));
  EXPECT_EQ(g.s.generator, "stripe-ring");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(count(g.s, r, OpKind::all_to_all), 3);  // Q, K|V in; O out
  auto dense = small_experiment({"parallel.cp=4", "parallel.partition=zigzag", "scope=attention_fwd",
                                 "parallel.shuffle=once"});
  auto z = testing::generate(dense, testing::model_of(dense, sparsity::HeadPattern::dense_causal()));
  EXPECT_EQ(z.s.generator, "zigzag-ring");
  EXPECT_EQ(count(z.s, 0, OpKind::all_to_all), 0);
}

TEST(UlyssesGenerator, AllToAllOnlyAroundLocalAttention) {
  auto e = small_experiment({"parallel.hp=4", "scope=attention_fwd_bwd"});
  auto g = testing::generate(e, testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  EXPECT_EQ(g.s.generator, "ulysses");
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(count(g.s, r, OpKind::all_to_all), 4);
    EXPECT_EQ(count(g.s, r, OpKind::attn_fwd), 1);
    EXPECT_EQ(count(g.s, r, OpKind::send), 0);
  }
}

}  // namespace
}  // namespace rm::generate
