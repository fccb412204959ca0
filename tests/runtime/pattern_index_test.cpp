// runtime/pattern_index: the kernels execute exactly the mask the sparsity
// model counted. THE oracle: for static vertical-slash and block-sparse
// patterns at 8K tokens, under zigzag, stripe and contiguous partitions of 2
// and 4 ranks, every (query rank, key rank) tile's kernel plan
// (kernels::make_plan with pattern_index's index) holds exactly as many
// 128 x 64 work items, summed over the layer's heads, as the model counts
// computed 128 x 64 tiles (sparsity::count at the experiment's block_q x
// block_k, which the test checks equal kernels::kQueryRows x kKeyRows), and the
// kernels' mask (kernels::attends) admits exactly the non-zero (q, k) pairs
// the model counts. Plus: dense patterns give dense; dynamic patterns and
// kinds the kernels cannot run are refused naming the pattern and the kind.
#include "runtime/pattern_index.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/plan.hpp"
#include "sim/sparsity/count.hpp"
#include "tests/support/config_error_of.hpp"

namespace rm::runtime {
namespace {

using kernels::SparseIndex;
using kernels::SparseMode;
using sparsity::TokenRun;
using sparsity::TokenSet;

// The default experiment (Qwen2.5-3B: 16 query heads, 2 KV heads) cut to 4
// layers, so that eager patterns draw 64 heads rather than 576, on a plain
// ring of 2 (its cp = 32 stripe needs seq_len divisible by 4096):
// pattern_index reads only the model, the pattern and seq_len.
Experiment experiment(std::vector<std::string> overrides) {
  static const ConfigStore store;
  overrides.insert(overrides.begin(), {"parallel.cp=2", "parallel.partition=contiguous", "parallel.ring=ring",
                                       "model.layers=4"});
  return load_experiment(store, "", overrides);
}

const char* const kStaticVs = R"({"name": "vs-static-test", "kind": "vertical_slash", "sink_tokens": 30,
  "local_diagonals": 100, "budgets": [{"vertical": 1000, "slash": 600, "heads": 3},
  {"vertical": 200, "slash": 2000, "heads": 1}, {"vertical": 3000, "slash": 100, "heads": 2},
  {"vertical": 30, "slash": 5000, "heads": 2}]})";

// The partitions as docs/generators.md defines them (the runtime tests do not
// link sim/placement): any token sets serve the oracle, which compares the
// kernels and the model on the same sets.
std::vector<TokenSet> contiguous(int64_t S, int W) {
  std::vector<TokenSet> out;
  for (int r = 0; r < W; ++r) out.push_back({{TokenRun{r * S / W, S / W}}});
  return out;
}
std::vector<TokenSet> zigzag(int64_t S, int W) {
  const int64_t c = S / (2 * W);
  std::vector<TokenSet> out;
  for (int r = 0; r < W; ++r) out.push_back({{TokenRun{r * c, c}, TokenRun{(2 * W - 1 - r) * c, c}}});
  return out;
}
std::vector<TokenSet> stripe(int64_t S, int W, int64_t t) {
  std::vector<TokenSet> out;
  for (int r = 0; r < W; ++r) out.push_back({{TokenRun{r * t, t, W * t, S / (W * t)}}});
  return out;
}

std::vector<int32_t> positions(const TokenSet& s) {
  std::vector<int32_t> out;
  for (int64_t t : s.tokens()) out.push_back(static_cast<int32_t>(t));
  return out;
}

// Sum over heads and over (q, k) in Q x K of kernels::attends, by key block:
// attends(q, k) is "k <= q (causal) and (block_selected(qb, kb) or k is a
// vertical)", so per query row and key block it is either every visible key
// of K in the block or K's verticals there, counted from prefix sums.
// Checked against the pair-by-pair sum (AttendsByBlocksIsAttends) before the
// oracle relies on it.
int64_t attended_pairs(const SparseIndex& index, int heads, const std::vector<int32_t>& q,
                       const std::vector<int32_t>& k, bool causal, int32_t seq_len) {
  const int32_t blocks = kernels::index_blocks(seq_len);
  // below[x] = keys of K before position x; the same for K's verticals of a head.
  std::vector<int32_t> is_key(size_t(seq_len), 0), below(size_t(seq_len) + 1, 0), vbelow(size_t(seq_len) + 1, 0);
  for (int32_t x : k) is_key[size_t(x)] = 1;
  for (int32_t x = 0; x < seq_len; ++x) below[size_t(x) + 1] = below[size_t(x)] + is_key[size_t(x)];
  std::vector<int32_t> key_blocks;
  for (int32_t kb = 0; kb < blocks; ++kb)
    if (below[size_t(std::min(seq_len, (kb + 1) * kernels::kIndexBlock))] > below[size_t(kb * kernels::kIndexBlock)])
      key_blocks.push_back(kb);
  std::vector<char> selected(size_t(blocks) * size_t(blocks));
  int64_t pairs = 0;
  for (int h = 0; h < heads; ++h) {
    std::vector<int32_t> is_vertical(size_t(seq_len), 0);
    if (index.mode == SparseMode::vertical_slash)
      for (int32_t v : index.vertical_slash[size_t(h)].verticals) is_vertical[size_t(v)] = is_key[size_t(v)];
    for (int32_t x = 0; x < seq_len; ++x) vbelow[size_t(x) + 1] = vbelow[size_t(x)] + is_vertical[size_t(x)];
    for (int32_t qb = 0; qb < blocks; ++qb)
      for (int32_t kb : key_blocks) selected[size_t(qb) * size_t(blocks) + size_t(kb)] = kernels::block_selected(index, h, qb, kb);
    for (int32_t qp : q)
      for (int32_t kb : key_blocks) {
        const int32_t lo = kb * kernels::kIndexBlock;
        const int32_t hi = std::min({lo + kernels::kIndexBlock, causal ? qp + 1 : seq_len, seq_len});
        if (hi <= lo) break;  // key blocks ascend: the rest are in the future
        const auto& count = selected[size_t(kernels::index_block(qp)) * size_t(blocks) + size_t(kb)] ? below : vbelow;
        pairs += count[size_t(hi)] - count[size_t(lo)];
      }
  }
  return pairs;
}

int64_t attended_pairs_brute(const SparseIndex& index, int heads, const std::vector<int32_t>& q,
                             const std::vector<int32_t>& k, bool causal) {
  int64_t pairs = 0;
  for (int h = 0; h < heads; ++h)
    for (int32_t qp : q)
      for (int32_t kp : k) pairs += kernels::attends(index, h, qp, kp, causal);
  return pairs;
}

// Work items of the plan summed over heads: each is one 128 x 64 (or smaller) tile the kernel computes.
int64_t plan_tiles(const kernels::TilePlan& plan) {
  return plan.per_head ? int64_t(plan.items.size()) : int64_t(plan.items.size()) * plan.shape.heads_q;
}

struct Partitioned {
  std::string name;
  std::vector<TokenSet> ranks;
};

// The oracle over every (query rank, key rank) tile of `layer`.
void expect_kernels_match_model(const Experiment& e, const sparsity::SparsityModel& m, int layer,
                                const std::vector<Partitioned>& partitions) {
  ASSERT_EQ(e.workload.block_q, kernels::kQueryRows);
  ASSERT_EQ(e.workload.block_k, kernels::kKeyRows);
  const sparsity::BlockShape shape{e.workload.block_q, e.workload.block_k};
  const SparseIndex index = pattern_index(m, layer, e.source);
  const bool causal = m.causal();
  const auto S = static_cast<int32_t>(e.workload.seq_len);
  for (const auto& part : partitions) {
    const int W = static_cast<int>(part.ranks.size());
    int64_t total_nnz = 0;
    for (int qr = 0; qr < W; ++qr)
      for (int kr = 0; kr < W; ++kr) {
        const std::vector<int32_t> qp = positions(part.ranks[size_t(qr)]), kp = positions(part.ranks[size_t(kr)]);
        const kernels::TileShape tile{e.model.heads, e.model.kv_heads, e.model.head_dim, int(qp.size()), int(kp.size())};
        const kernels::TilePlan plan = kernels::make_plan(tile, {qp, kp, S, causal}, index);
        sparsity::TileCost model;
        for (int h = 0; h < e.model.heads; ++h)
          model += sparsity::count(m.head(layer, h), part.ranks[size_t(qr)], part.ranks[size_t(kr)], shape);
        const std::string at = part.name + " layer " + std::to_string(layer) + " tile (" + std::to_string(qr) +
                               ", " + std::to_string(kr) + ")";
        EXPECT_EQ(plan_tiles(plan), model.blocks) << at << ": 128x64 tiles";
        EXPECT_EQ(attended_pairs(index, e.model.heads, qp, kp, causal, S), model.nnz) << at << ": non-zeros";
        total_nnz += model.nnz;
      }
    EXPECT_GT(total_nnz, 0) << part.name;
  }
}

std::vector<Partitioned> partitions(int64_t S, int64_t block_tokens) {
  return {{"zigzag cp=2", zigzag(S, 2)},
          {"zigzag cp=4", zigzag(S, 4)},
          {"stripe 128 cp=2", stripe(S, 2, 128)},
          {"stripe 128 cp=4", stripe(S, 4, 128)},
          {"stripe " + std::to_string(block_tokens) + " cp=4", stripe(S, 4, block_tokens)},
          {"contiguous cp=4", contiguous(S, 4)}};
}

TEST(PatternIndex, AttendsByBlocksIsAttends) {
  const Experiment e = experiment({"workload.seq_len=1024", std::string("workload.pattern=") + kStaticVs});
  const sparsity::SparsityModel m = pattern_model(e);
  const SparseIndex index = pattern_index(m, 3, e.source);
  for (const auto& part : {zigzag(1024, 2), stripe(1024, 4, 128)})
    for (const auto& q : part)
      for (const auto& k : part)
        EXPECT_EQ(attended_pairs(index, e.model.heads, positions(q), positions(k), true, 1024),
                  attended_pairs_brute(index, e.model.heads, positions(q), positions(k), true));
}

// The shipped MInference budgets, made static, dealt to 4 x 16 heads (scaled by largest remainder).
TEST(PatternIndex, StaticVerticalSlashTilesMatchTheModel) {
  const Experiment e = experiment({"workload.seq_len=8192", "workload.pattern=qwen2.5-3b-static",
                                   "workload.pattern.dynamic=false"});
  const sparsity::SparsityModel m = pattern_model(e);
  for (int layer : {0, 3}) {
    const SparseIndex index = pattern_index(m, layer, e.source);
    ASSERT_EQ(index.mode, SparseMode::vertical_slash);
    ASSERT_EQ(index.vertical_slash.size(), size_t(e.model.heads));
    expect_kernels_match_model(e, m, layer, partitions(8192, 256));
  }
}

// The pattern and model the runtime's CPU runs ship with (what tests/runtime/run executes).
TEST(PatternIndex, ShippedTinyStaticPatternTilesMatchTheModel) {
  const Experiment e = experiment({"model=tiny-gqa-2l", "workload.seq_len=8192", "workload.pattern=tiny-static-vs"});
  ASSERT_EQ(e.model.layers, 2);
  const sparsity::SparsityModel m = pattern_model(e);
  for (int layer : {0, 1}) expect_kernels_match_model(e, m, layer, partitions(8192, 256));
}

TEST(PatternIndex, InlineVerticalSlashAtALengthNotAMultipleOfTheBlock) {
  // 6000 tokens: the last index block is short, so offsets up to 6015 still cross the last block diagonal.
  const Experiment e = experiment({"workload.seq_len=6000", std::string("workload.pattern=") + kStaticVs});
  const sparsity::SparsityModel m = pattern_model(e);
  expect_kernels_match_model(e, m, 1, {{"contiguous cp=2", contiguous(6000, 2)}, {"zigzag cp=2", zigzag(6000, 2)}});
  // An offset in [seq_len, 128 * blocks) keeps the last block diagonal.
  const sparsity::SparsityModel edge("edge", 1, 1, 6000, false,
                                     {std::make_shared<const sparsity::HeadPattern>(sparsity::HeadPattern::vertical_slash(
                                         sparsity::IntervalSet({{0, 1}}), sparsity::IntervalSet({{6010, 6011}})))});
  const SparseIndex index = pattern_index(edge, 0, "test");
  EXPECT_EQ(index.vertical_slash[0].slashes, std::vector<int32_t>{46 * 128});
  for (int32_t q : {5900, 5999})
    for (int32_t k : {0, 5, 100, 127, 128})
      EXPECT_EQ(kernels::attends(index, 0, q, k, true), edge.head(0, 0).allowed(q, k)) << q << ", " << k;
}

TEST(PatternIndex, BlockSparseTilesMatchTheModel) {
  for (int block : {128, 256}) {
    const std::string spec = R"({"name": "bs-test", "kind": "block_sparse", "block_tokens": )" + std::to_string(block) +
                             R"(, "local_blocks": 2, "global_blocks": 1, "stride_blocks": 5})";
    const Experiment e = experiment({"workload.seq_len=8192", "workload.pattern=" + spec});
    const sparsity::SparsityModel m = pattern_model(e);
    const SparseIndex index = pattern_index(m, 0, e.source);
    ASSERT_EQ(index.mode, SparseMode::block_mask);
    ASSERT_EQ(index.block_mask.size(), size_t(e.model.heads));
    expect_kernels_match_model(e, m, 0, partitions(8192, block));
  }
}

TEST(PatternIndex, DensePatternsGiveDense) {
  const Experiment causal = experiment({"workload.seq_len=8192", "workload.pattern=dense-causal"});
  EXPECT_EQ(pattern_index(causal, 0).mode, SparseMode::dense);
  EXPECT_TRUE(pattern_causal(causal));
  const Experiment full = experiment({"workload.seq_len=8192", "workload.pattern=dense-full"});
  EXPECT_EQ(pattern_index(full, 3).mode, SparseMode::dense);
  EXPECT_FALSE(pattern_causal(full));
  // A vertical-slash pattern is causal, dynamic or not.
  EXPECT_TRUE(pattern_causal(experiment({"workload.seq_len=8192", "workload.pattern=qwen2.5-3b-static"})));
}

TEST(PatternIndex, RefusesWhatTheKernelsCannotRunNamingPatternAndKind) {
  auto refusal = [](const std::vector<std::string>& overrides, int layer = 0) {
    const Experiment e = experiment(overrides);
    return test::config_error_of([&] { pattern_index(e, layer); });
  };
  const std::string dynamic = refusal({"workload.seq_len=8192", "workload.pattern=qwen2.5-3b-static"});
  EXPECT_NE(dynamic.find("pattern qwen2.5-3b-static"), std::string::npos) << dynamic;
  EXPECT_NE(dynamic.find("dynamic (vertical_slash heads)"), std::string::npos) << dynamic;
  const std::string topp = refusal({"workload.seq_len=8192", "workload.pattern=topp-synthetic"});
  EXPECT_NE(topp.find("pattern topp-synthetic"), std::string::npos) << topp;
  EXPECT_NE(topp.find("dynamic"), std::string::npos) << topp;
  for (const char* name : {"sliding-window", "a-shape", "document-causal", "document-full"}) {
    const std::string msg = refusal({"workload.seq_len=8192", std::string("workload.pattern=") + name});
    EXPECT_NE(msg.find(std::string("pattern ") + name), std::string::npos) << msg;
    std::string kind = name;
    std::replace(kind.begin(), kind.end(), '-', '_');
    EXPECT_NE(msg.find(kind + " heads"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  const std::string small_blocks = refusal({"workload.seq_len=8192",
      R"(workload.pattern={"name": "bs64", "kind": "block_sparse", "block_tokens": 64, "local_blocks": 2, "global_blocks": 1})"});
  EXPECT_NE(small_blocks.find("pattern bs64"), std::string::npos) << small_blocks;
  EXPECT_NE(small_blocks.find("block_tokens 64"), std::string::npos) << small_blocks;
  const std::string layer = refusal({"workload.seq_len=8192", "workload.pattern=dense-causal"}, 4);
  EXPECT_NE(layer.find("layer 4"), std::string::npos) << layer;
}

}  // namespace
}  // namespace rm::runtime
