// Property tests: every counting path against brute force over a materialised
// mask, many random patterns, partitions and tile shapes, zero tolerance.
#include <gtest/gtest.h>

#include "sim/sparsity/aligned_count.hpp"
#include "sim/sparsity/block_count.hpp"
#include "sim/sparsity/general_count.hpp"
#include "tests/support/sparsity_brute.hpp"

namespace rm::sparsity {
namespace {

using namespace testing;

std::vector<TokenSet> random_partition(Rng& rng, int64_t s, int w, int64_t unit) {
  switch (uniform(rng, 0, 3)) {
    case 0: return contiguous(s, w);
    case 1: return zigzag(s, w);
    case 2: return stripe(s, w, s / w / std::max<int64_t>(1, s / w / unit));
    default: return random_runs(rng, s, w, unit);
  }
}

void expect_pair_costs(const HeadPattern& p, const Mask& m, const std::vector<TokenSet>& ranks, BlockShape s,
                       const std::string& what) {
  const auto got = pair_costs(p, ranks, s);
  ASSERT_EQ(got.size(), ranks.size() * ranks.size());
  for (size_t a = 0; a < ranks.size(); ++a)
    for (size_t b = 0; b < ranks.size(); ++b) {
      const TileCost want = brute_count(m, ranks[a], ranks[b], s);
      const TileCost& have = got[a * ranks.size() + b];
      ASSERT_EQ(have.blocks, want.blocks) << what << " pair " << a << "," << b;
      ASSERT_EQ(have.nnz, want.nnz) << what << " pair " << a << "," << b;
    }
}

TEST(SparsityCount, CountMatchesBruteForceOnRandomSets) {
  Rng rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    const int64_t s = uniform(rng, 1, 400);
    const HeadPattern p = random_pattern(rng, s);
    const Mask m(p, s);
    const BlockShape shape{uniform(rng, 1, 40), uniform(rng, 1, 40)};
    auto ranks = random_runs(rng, s, static_cast<int>(uniform(rng, 1, 3)), uniform(rng, 1, 50));
    const TokenSet& q = ranks[0];
    const TokenSet& k = ranks[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(ranks.size()) - 1))];
    const TileCost want = brute_count(m, q, k, shape);
    const TileCost have = count(p, q, k, shape);
    ASSERT_EQ(have, want) << "iter " << iter << " kind " << to_string(p.kind()) << " S " << s;
  }
}

TEST(SparsityCount, PairCostsMatchBruteForceOnUnalignedPartitions) {
  Rng rng(12);
  for (int iter = 0; iter < 60; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 6));
    const int64_t s = w * 2 * uniform(rng, 10, 60);
    const HeadPattern p = random_pattern(rng, s);
    const BlockShape shape{uniform(rng, 1, 48), uniform(rng, 1, 48)};
    expect_pair_costs(p, Mask(p, s), random_partition(rng, s, w, uniform(rng, 1, 30)), shape,
                      "iter " + std::to_string(iter) + " " + to_string(p.kind()));
  }
}

// Aligned inputs: the dispatcher's fast path and the general path, each against brute force.
TEST(SparsityCount, AlignedAndGeneralPathsMatchBruteForce) {
  Rng rng(13);
  int fast = 0;
  for (int iter = 0; iter < 80; ++iter) {
    const int64_t bk = int64_t(1) << uniform(rng, 0, 4), bq = bk * uniform(rng, 1, 4);
    const int w = static_cast<int>(uniform(rng, 1, 6));
    const int64_t unit = bq * uniform(rng, 1, 2);
    const int64_t s = 2 * w * unit * uniform(rng, 1, 4);
    const HeadPattern p = random_pattern(rng, s);
    const Mask m(p, s);
    std::vector<TokenSet> ranks;
    switch (uniform(rng, 0, 3)) {
      case 0: ranks = contiguous(s, w); break;  // s/w is a multiple of unit
      case 1: ranks = zigzag(s, w); break;
      case 2: ranks = stripe(s, w, unit); break;
      default: ranks = random_runs(rng, s, w, unit);
    }
    const BlockShape shape{bq, bk};
    const std::string what = "iter " + std::to_string(iter) + " " + to_string(p.kind());
    expect_pair_costs(p, m, ranks, shape, what);
    fast += aligned_supported(p, shape);
    if (block_unit(p)) continue;  // counted by block_count (sparsity_kernel_plan_test.cpp)
    for (size_t a = 0; a < ranks.size(); ++a) {
      const TokenSet& k = ranks[(a + 1) % ranks.size()];
      ASSERT_EQ(general_count(p, cut_tiles(ranks[a], bq), cut_tiles(k, bk)), brute_count(m, ranks[a], k, shape)) << what;
    }
  }
  EXPECT_GT(fast, 30);  // the fast path was really exercised
}

TEST(SparsityCount, ChunkRowCostsMatchBruteForce) {
  Rng rng(14);
  for (int iter = 0; iter < 60; ++iter) {
    const bool aligned = iter % 2 == 0;
    const int64_t bk = aligned ? int64_t(1) << uniform(rng, 0, 4) : uniform(rng, 1, 30);
    const int64_t bq = aligned ? bk * uniform(rng, 1, 3) : uniform(rng, 1, 30);
    const int64_t chunk = aligned ? bq * uniform(rng, 1, 4) : uniform(rng, 1, 100);
    const int64_t s = aligned ? chunk * uniform(rng, 1, 8) : uniform(rng, 1, 500);
    const HeadPattern p = random_pattern(rng, s);
    const Mask m(p, s);
    const BlockShape shape{bq, bk};
    const auto got = chunk_row_costs(p, s, chunk, shape);
    ASSERT_EQ(static_cast<int64_t>(got.size()), (s + chunk - 1) / chunk);
    const TokenSet all{{{0, s, 0, 1}}};
    for (size_t c = 0; c < got.size(); ++c) {
      const auto c0 = static_cast<int64_t>(c) * chunk;
      const TokenSet row{{{c0, std::min(chunk, s - c0), 0, 1}}};
      ASSERT_EQ(got[c], brute_count(m, row, all, shape)) << "iter " << iter << " chunk " << c;
    }
  }
}

// Aligned chunk rows (Bq divides seq_len and chunk): chunk_row_costs takes the
// owner-free fast path, which equals the general path chunk by chunk.
TEST(SparsityCount, ChunkRowCostsFastPathEqualsGeneralPath) {
  Rng rng(16);
  for (int iter = 0; iter < 80; ++iter) {
    const int64_t bk = int64_t(1) << uniform(rng, 0, 4), bq = bk * uniform(rng, 1, 4);
    const int64_t chunk = bq * uniform(rng, 1, 4);
    const int64_t s = bq * uniform(rng, 1, 60);  // the last chunk may be short
    HeadPattern p = random_pattern(rng, s);
    if (!aligned_supported(p, {bq, bk})) p = HeadPattern::a_shape(uniform(rng, 0, s / 4), uniform(rng, 1, s));
    const BlockShape shape{bq, bk};
    ASSERT_TRUE(aligned_chunk_rows_supported(p, s, chunk, shape));
    const auto fast = aligned_chunk_row_costs(p, s, chunk, shape);
    ASSERT_EQ(chunk_row_costs(p, s, chunk, shape), fast);  // the dispatcher takes the fast path
    ASSERT_EQ(static_cast<int64_t>(fast.size()), (s + chunk - 1) / chunk);
    const auto keys = cut_tiles(TokenSet{{{0, s, 0, 1}}}, bk);
    for (size_t c = 0; c < fast.size(); ++c) {
      const auto c0 = static_cast<int64_t>(c) * chunk;
      const TokenSet row{{{c0, std::min(chunk, s - c0), 0, 1}}};
      ASSERT_EQ(fast[c], general_count(p, cut_tiles(row, bq), keys)) << "iter " << iter << " " << to_string(p.kind()) << " chunk " << c;
    }
  }
  EXPECT_FALSE(aligned_chunk_rows_supported(HeadPattern::dense_causal(), 256, 96, {64, 32}));  // chunk not whole tiles
  EXPECT_FALSE(aligned_chunk_rows_supported(HeadPattern::document_causal({0, 100}), 256, 64, {64, 32}));
}

// Balanced-style partitions: periods of w one-tile chunks, each dealt forward or
// backward, so key ownership has many short segments and no period — the case
// where aligned_costs walks R's runs over the segments.
TEST(SparsityCount, PairCostsOnReversedPeriodsMatchBruteForce) {
  Rng rng(17);
  for (int iter = 0; iter < 12; ++iter) {
    const int w = static_cast<int>(uniform(rng, 2, 4));
    const int64_t bk = int64_t(1) << uniform(rng, 0, 2), bq = bk * uniform(rng, 1, 2);
    const int64_t periods = uniform(rng, 8, 24), s = periods * w * bq;
    std::vector<TokenSet> ranks(static_cast<size_t>(w));
    for (int64_t per = 0; per < periods; ++per) {
      const bool rev = uniform(rng, 0, 1) == 1;
      for (int r = 0; r < w; ++r)
        ranks[static_cast<size_t>(rev ? w - 1 - r : r)].runs.push_back({(per * w + r) * bq, bq, 0, 1});
    }
    const HeadPattern p = HeadPattern::vertical_slash(random_intervals(rng, s, 6), random_intervals(rng, s, 6));
    expect_pair_costs(p, Mask(p, s), ranks, {bq, bk}, "iter " + std::to_string(iter));
  }
}

TEST(SparsityCount, AlignedTotalBlocksMatchesBruteForce) {
  Rng rng(15);
  for (int iter = 0; iter < 60; ++iter) {
    const int64_t bk = int64_t(1) << uniform(rng, 0, 4), bq = bk * uniform(rng, 1, 4);
    const int64_t s = bq * uniform(rng, 1, 30);
    HeadPattern p = random_pattern(rng, s);
    if (!aligned_supported(p, {bq, bk})) p = HeadPattern::a_shape(uniform(rng, 0, s / 4), uniform(rng, 1, s));
    const TokenSet all{{{0, s, 0, 1}}};
    ASSERT_EQ(aligned_total_blocks(p, s, {bq, bk}), brute_count(Mask(p, s), all, all, {bq, bk}).blocks) << "iter " << iter;
  }
}

// Kernel semantics by hand: 16 tokens, 4-token slash blocks, 4 x 2 tiles.
TEST(SparsityCount, SlashBlocksAndGatheredVerticalsByHand) {
  const TokenSet all{{{0, 16, 0, 1}}};
  // Offset 0 selects only the diagonal blocks (2 chunks each: 8 tiles); the
  // vertical at 1 lies off them for query blocks 1-3, one gathered tile each.
  const auto p = HeadPattern::vertical_slash(IntervalSet::from_points({1}), IntervalSet::from_points({0}), 4);
  EXPECT_EQ(count(p, all, all, {4, 2}), (TileCost{8 + 3, 4 * 10 + 12}));
  // Offset 5 crosses block diagonals 1 and 2: 3 + 2 more block pairs of
  // 2 chunks; the vertical now lies in a selected block for query blocks 1, 2.
  const auto q = HeadPattern::vertical_slash(IntervalSet::from_points({1}), IntervalSet::from_points({0, 5}), 4);
  EXPECT_EQ(q.slashes(), IntervalSet({{0, 3}}));
  EXPECT_EQ(count(q, all, all, {4, 2}), (TileCost{8 + 10 + 1, 40 + 5 * 16 + 4}));
}

// The case: 64 verticals, each in its own unselected block, cost one
// gathered 128 x 64 tile per query block (the model charged 64 before).
TEST(SparsityCount, SixtyFourVerticalsAreOneGatheredTile) {
  std::vector<int64_t> v;
  for (int64_t j = 0; j < 64; ++j) v.push_back(128 * j + 7);
  const auto p = HeadPattern::vertical_slash(IntervalSet::from_points(v), IntervalSet::from_points({0}));
  const TokenSet q{{{128 * 64, 128, 0, 1}}}, k{{{0, 128 * 65, 0, 1}}};
  EXPECT_EQ(count(p, q, k, {}), (TileCost{2 + 1, 128 * 64 + 128 * 129 / 2}));
}

TEST(SparsityCount, DefaultStripeOnDenseCausalIsBalanced) {
  // 8 ranks, stripes of 128 tokens, 8K dense causal.
  std::vector<TokenSet> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({{{r * 128, 128, 8 * 128, 8}}});
  const auto c = pair_costs(HeadPattern::dense_causal(), ranks, {});
  int64_t total = 0;
  for (const auto& t : c) total += t.nnz;
  EXPECT_EQ(total, int64_t(8192) * 8193 / 2);
  // Rank 1's query block 8m+1 sees rank 0's stripes 0, 8, ..., 8m: 2(m+1) key tiles.
  EXPECT_EQ(c[1 * 8 + 0].blocks, 72);
}

}  // namespace
}  // namespace rm::sparsity
