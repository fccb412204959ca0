// The dense family's closed forms (dense_count.hpp) against brute force over
// a materialised mask: dense and document masks, causal and full, random
// document splits, token sets of every shape (contiguous, zigzag, stripes of
// any width, reversed periods, shuffled pieces, arbitrary strided runs that
// may overlap), any tile shape; count, pair_costs and chunk_row_costs, zero
// tolerance. Plus hand-computed cases and sums at sizes no per-token loop
// could reach.
#include <gtest/gtest.h>

#include "tests/support/sparsity_brute.hpp"

namespace rm::sparsity {
namespace {

using namespace testing;

// Strided runs anywhere in [0, s): pieces may overlap, run backward or repeat.
TokenSet random_strided(Rng& rng, int64_t s) {
  TokenSet t;
  for (int n = static_cast<int>(uniform(rng, 0, 5)); n > 0; --n) {
    TokenRun r;
    r.len = uniform(rng, 1, std::min<int64_t>(s, 12));
    r.count = uniform(rng, 1, 6);
    r.stride = uniform(rng, 0, 3) == 0 ? uniform(rng, 0, r.len) : r.len + uniform(rng, 0, 20);
    const int64_t span = (r.count - 1) * r.stride + r.len;
    if (span > s) r.count = 1;
    r.begin = uniform(rng, 0, s - std::min(s, (r.count - 1) * r.stride + r.len));
    t.runs.push_back(r);
  }
  return t;
}

// Periods of w chunks of g tokens, each dealt forward or backward (the balanced partition's shape).
std::vector<TokenSet> reversed_periods(Rng& rng, int64_t s, int w, int64_t g) {
  std::vector<TokenSet> ranks(static_cast<size_t>(w));
  for (int64_t per = 0; per * w * g < s; ++per) {
    const bool rev = uniform(rng, 0, 1) == 1;
    for (int r = 0; r < w; ++r)
      if (const int64_t b = (per * w + r) * g; b < s)
        ranks[static_cast<size_t>(rev ? w - 1 - r : r)].runs.push_back({b, std::min(g, s - b), 0, 1});
  }
  return ranks;
}

std::vector<TokenSet> any_partition(Rng& rng, int64_t s, int w) {
  switch (uniform(rng, 0, 5)) {
    case 0: return contiguous(s, w);
    case 1: return zigzag(s, w);
    case 2: return stripe(s, w, 1);
    case 3: {
      std::vector<int64_t> widths;  // every stripe width that tiles s over w ranks
      for (int64_t g = 1; g * w <= s; ++g)
        if (s % (g * w) == 0) widths.push_back(g);
      return stripe(s, w, widths[static_cast<size_t>(uniform(rng, 0, int64_t(widths.size()) - 1))]);
    }
    case 4: return reversed_periods(rng, s, w, uniform(rng, 1, 9));
    default: return random_runs(rng, s, w, uniform(rng, 1, 20));
  }
}

BlockShape any_shape(Rng& rng) { return {uniform(rng, 1, 40), uniform(rng, 1, 40)}; }

std::string what(int iter, const HeadPattern& p) { return "iter " + std::to_string(iter) + " " + to_string(p.kind()); }

TEST(DenseCount, CountMatchesBruteForceOnAnyTokenSets) {
  Rng rng(21);
  for (int iter = 0; iter < 1500; ++iter) {
    const int64_t s = uniform(rng, 1, 300);
    const HeadPattern p = random_dense_family(rng, s);
    const Mask m(p, s);
    const BlockShape shape = any_shape(rng);
    const TokenSet q = random_strided(rng, s), k = random_strided(rng, s);
    ASSERT_EQ(count(p, q, k, shape), brute_count(m, q, k, shape)) << what(iter, p) << " S " << s;
  }
}

TEST(DenseCount, PairCostsMatchBruteForceOnEveryPartitionShape) {
  Rng rng(22);
  for (int iter = 0; iter < 300; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 5));
    const int64_t s = 2 * w * uniform(rng, 1, 50);
    const HeadPattern p = random_dense_family(rng, s);
    const Mask m(p, s);
    const BlockShape shape = any_shape(rng);
    const auto ranks = any_partition(rng, s, w);
    const auto got = pair_costs(p, ranks, shape);
    ASSERT_EQ(got.size(), ranks.size() * ranks.size());
    for (size_t a = 0; a < ranks.size(); ++a)
      for (size_t b = 0; b < ranks.size(); ++b)
        ASSERT_EQ(got[a * ranks.size() + b], brute_count(m, ranks[a], ranks[b], shape)) << what(iter, p) << " pair " << a << "," << b;
  }
}

TEST(DenseCount, ChunkRowCostsMatchBruteForce) {
  Rng rng(23);
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t s = uniform(rng, 1, 400), chunk = uniform(rng, 1, 120);
    const HeadPattern p = random_dense_family(rng, s);
    const Mask m(p, s);
    const BlockShape shape = any_shape(rng);
    const auto got = chunk_row_costs(p, s, chunk, shape);
    ASSERT_EQ(static_cast<int64_t>(got.size()), (s + chunk - 1) / chunk);
    const TokenSet all{{{0, s, 0, 1}}};
    for (size_t c = 0; c < got.size(); ++c) {
      const int64_t c0 = static_cast<int64_t>(c) * chunk;
      ASSERT_EQ(got[c], brute_count(m, TokenSet{{{c0, std::min(chunk, s - c0), 0, 1}}}, all, shape)) << what(iter, p) << " chunk " << c;
    }
  }
}

TEST(DenseCount, HandComputedCases) {
  const TokenSet all{{{0, 200, 0, 1}}};
  // Full attention computes every tile: 2 x 4 tiles of 100 x 50, 200^2 pairs.
  EXPECT_EQ(count(HeadPattern::dense_full(), all, all, {100, 50}), (TileCost{8, 40000}));
  // Causal: query tile 0 sees key tiles 0, 1; tile 1 sees all four.
  EXPECT_EQ(count(HeadPattern::dense_causal(), all, all, {100, 50}), (TileCost{6, 200 * 201 / 2}));
  // Two documents of 100: only the diagonal tiles, inside each document causal or full.
  EXPECT_EQ(count(HeadPattern::document_causal({0, 100}), all, all, {100, 100}), (TileCost{2, 2 * 5050}));
  EXPECT_EQ(count(HeadPattern::document_full({0, 100}), all, all, {100, 100}), (TileCost{2, 2 * 10000}));
  // Documents [0, 60), [60, 200), tiles of 100: a tile straddling the boundary
  // meets both. Causal: (0,0), (1,0) [keys 60..99 of document 1], (1,1); full: all four.
  EXPECT_EQ(count(HeadPattern::document_causal({0, 60}), all, all, {100, 100}), (TileCost{3, 60 * 61 / 2 + 140 * 141 / 2}));
  EXPECT_EQ(count(HeadPattern::document_full({0, 60}), all, all, {100, 100}), (TileCost{4, 60 * 60 + 140 * 140}));
  // Stripes of one token over two ranks, full attention: rank 0 = evens, rank 1 = odds.
  const std::vector<TokenSet> ranks{{{{0, 1, 2, 100}}}, {{{1, 1, 2, 100}}}};
  for (const auto& c : pair_costs(HeadPattern::dense_full(), ranks, {50, 25})) EXPECT_EQ(c, (TileCost{8, 10000}));
}

// Sizes no per-token loop would finish in a test: 2^26 tokens in stripes of
// one token over 4 ranks, and every pair sum has its closed form.
TEST(DenseCount, CountsByRunsNotTokens) {
  const int64_t s = int64_t(1) << 26;
  const auto ranks = stripe(s, 4, 1);
  int64_t causal = 0, full = 0, docs = 0, full_blocks = 0;
  for (const auto& c : pair_costs(HeadPattern::dense_causal(), ranks, {1 << 16, 1 << 15})) causal += c.nnz;
  for (const auto& c : pair_costs(HeadPattern::dense_full(), ranks, {1 << 16, 1 << 15})) full += c.nnz, full_blocks += c.blocks;
  for (const auto& c : pair_costs(HeadPattern::document_causal({0, s / 2}), ranks, {1 << 16, 1 << 15})) docs += c.nnz;
  EXPECT_EQ(causal, s * (s + 1) / 2);
  EXPECT_EQ(full, s * s);
  EXPECT_EQ(docs, 2 * ((s / 2) * (s / 2 + 1) / 2));
  EXPECT_EQ(full_blocks, 16 * (s / 4 >> 16) * (s / 4 >> 15));
}

TEST(DenseCount, FullAttentionIsCausalBothWays) {
  // On disjoint query and key sets, full pairs = causal(Q, K) + causal(K, Q), per document too.
  Rng rng(24);
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t s = uniform(rng, 2, 2000);
    const auto ranks = any_partition(rng, 2 * (s / 2), 2);
    const auto starts = random_doc_starts(rng, 2 * (s / 2), 20);
    const BlockShape shape = any_shape(rng);
    const auto c = pair_costs(HeadPattern::document_causal(starts), ranks, shape);
    const auto f = pair_costs(HeadPattern::document_full(starts), ranks, shape);
    ASSERT_EQ(f[1].nnz, c[1].nnz + c[2].nnz) << "iter " << iter;
    ASSERT_EQ(f[1].nnz, f[2].nnz) << "iter " << iter;
  }
}

}  // namespace
}  // namespace rm::sparsity
