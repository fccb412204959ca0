// The top-p calibration's fast path against its plain one, zero tolerance:
// PrefixBlocks' incremental whole-sequence count against chunk_row_costs of
// the assembled head over random draws and random probe orders (growing and
// shrinking), and density_head (gallop + incremental count) against
// density_head_reference (bisection, each probe counted from scratch) on many
// random shapes; plus that a probe costs only the pairs that moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "sim/sparsity/count.hpp"
#include "sim/sparsity/index_draws.hpp"
#include "sim/sparsity/prefix_blocks.hpp"
#include "sim/sparsity/vs_generator.hpp"

namespace rm::sparsity {
namespace {

HeadPattern assembled(int64_t seq_len, int64_t unit, int64_t sinks, int64_t local, const std::vector<int64_t>& v, size_t nv,
                      const std::vector<int64_t>& d, size_t nd) {
  std::vector<Interval> cols{{0, std::min(sinks, seq_len)}}, diags{{0, std::min(local, seq_len)}};
  for (size_t i = 0; i < nv && i < v.size(); ++i) cols.push_back({v[i], v[i] + 1});
  for (size_t i = 0; i < nd && i < d.size(); ++i) diags.push_back({d[i], d[i] + 1});
  return HeadPattern::vertical_slash(IntervalSet(std::move(cols)), IntervalSet(std::move(diags)), unit);
}

TEST(PrefixBlocks, EqualsChunkRowCostsOnRandomPrefixesBothWays) {
  std::mt19937_64 rng(12345);
  int cases = 0;
  for (int it = 0; it < 120; ++it) {
    const int64_t unit = std::vector<int64_t>{4, 8, 16, 128}[size_t(it % 4)];
    const BlockShape shape{unit, unit / std::vector<int64_t>{1, 2, 4}[size_t(rng() % 3)]};
    const int64_t blocks = 1 + int64_t(rng() % (unit == 128 ? 40 : 200));
    const int64_t seq_len = blocks * unit + int64_t(rng() % unit);  // the count runs over whole blocks only
    const int64_t n_tokens = seq_len / unit * unit;
    const int64_t sinks = int64_t(rng() % 40), local = 1 + int64_t(rng() % (3 * unit));
    const Spread vs = rng() % 2 ? Spread::uniform : Spread::log_uniform;
    const Spread ss = rng() % 2 ? Spread::uniform : Spread::log_uniform;
    const auto v = draw_distinct(rng, sinks, seq_len, int64_t(rng() % 300), vs);
    const auto d = draw_distinct(rng, local, seq_len, int64_t(rng() % 300), ss);
    ASSERT_TRUE(PrefixBlocks::supported(n_tokens, unit, std::min(local, seq_len), shape));
    PrefixBlocks count(n_tokens, unit, shape, std::min(sinks, seq_len), std::min(local, seq_len), v, d);
    for (int probe = 0; probe < 12; ++probe) {
      const size_t nv = rng() % (v.size() + 2), nd = rng() % (d.size() + 2);
      const HeadPattern p = assembled(seq_len, unit, sinks, local, v, nv, d, nd);
      ASSERT_EQ(count.blocks(nv, nd), chunk_row_costs(p, n_tokens, n_tokens, shape)[0].blocks)
          << "case " << it << " probe " << probe << " unit " << unit << " bk " << shape.bk << " S " << seq_len
          << " nv " << nv << " nd " << nd;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 120 * 12);
}

// The upper bound by order statistics of the column blocks equals the sweep
// over every block, on random prefixes moved both ways (and never falls
// below the exact count: it is the bound the search trusts).
TEST(PrefixBlocks, UpperBoundByOrderStatisticsEqualsSweep) {
  std::mt19937_64 rng(4242);
  for (int it = 0; it < 200; ++it) {
    const int64_t unit = std::vector<int64_t>{4, 8, 16, 128}[size_t(it % 4)];
    const BlockShape shape{unit, unit / std::vector<int64_t>{1, 2, 4}[size_t(rng() % 3)]};
    const int64_t blocks = 1 + int64_t(rng() % (it % 5 == 0 ? 3000 : 300));
    const int64_t seq_len = blocks * unit;
    const int64_t sinks = int64_t(rng() % 40), local = 1 + int64_t(rng() % (3 * unit));
    const auto v = draw_distinct(rng, sinks, seq_len, int64_t(rng() % 600), rng() % 2 ? Spread::uniform : Spread::log_uniform);
    const auto d = draw_distinct(rng, local, seq_len, int64_t(rng() % 100), Spread::log_uniform);
    PrefixBlocks count(seq_len, unit, shape, std::min(sinks, seq_len), std::min(local, seq_len), v, d);
    for (int probe = 0; probe < 10; ++probe) {
      const size_t nv = rng() % (v.size() + 2), nd = rng() % (d.size() + 2);
      const int64_t fast = count.upper(nv, nd);
      ASSERT_EQ(fast, count.upper_by_sweep(nv, nd)) << "case " << it << " probe " << probe;
      ASSERT_GE(fast, count.blocks(nv, nd)) << "case " << it << " probe " << probe;
    }
  }
}

TEST(PrefixBlocks, NeedsDiagonalZeroAndWholeTileBlocks) {
  EXPECT_TRUE(PrefixBlocks::supported(1024, 128, 1, {128, 64}));
  EXPECT_FALSE(PrefixBlocks::supported(1024, 128, 0, {128, 64}));   // no local diagonal: diagonal 0 may be off
  EXPECT_FALSE(PrefixBlocks::supported(1000, 128, 1, {128, 64}));   // not whole blocks
  EXPECT_FALSE(PrefixBlocks::supported(1024, 128, 1, {64, 64}));    // two segments per block
  EXPECT_FALSE(PrefixBlocks::supported(1024, 128, 1, {128, 48}));   // chunks straddle blocks
  EXPECT_FALSE(PrefixBlocks::supported(0, 128, 1, {128, 64}));
}

// The point of the class: moving a prefix by one draw costs the pairs of
// that draw only, not a recount (fails if blocks() recounts from scratch).
TEST(PrefixBlocks, OneMoreDrawCostsOnlyItsPairs) {
  std::mt19937_64 rng(7);
  const int64_t seq_len = 128 * 512;
  const auto v = draw_distinct(rng, 30, seq_len, 400, Spread::uniform);
  const auto d = draw_distinct(rng, 100, seq_len, 400, Spread::uniform);
  PrefixBlocks count(seq_len, 128, {128, 64}, 30, 100, v, d);
  count.blocks(300, 300);
  const int64_t before = count.pair_updates();
  count.blocks(301, 300);  // one column: at most one update per covered diagonal (<= 2 per offset + local)
  EXPECT_LE(count.pair_updates() - before, 2 * 300 + 2);
  const int64_t mid = count.pair_updates();
  count.blocks(301, 301);  // one offset: at most two diagonals, one update per column each
  EXPECT_LE(count.pair_updates() - mid, 2 * (301 + 30));
  const int64_t again = count.pair_updates();
  count.blocks(301, 301);  // the same probe: nothing moves
  EXPECT_EQ(count.pair_updates(), again);
}

TEST(DensityHead, FastPathGivesTheReferenceHeadOnRandomShapes) {
  std::mt19937_64 rng(99);
  for (int it = 0; it < 150; ++it) {
    VsShape s;
    s.seq_len = std::vector<int64_t>{100, 128, 1000, 4096, 8192 + 77, 32768, 65536}[size_t(it % 7)];
    s.sink_tokens = int64_t(rng() % 64);
    s.local_diagonals = it % 10 == 0 ? 0 : int64_t(rng() % 300);  // 0: the fallback path
    s.vertical_spread = rng() % 2 ? Spread::uniform : Spread::log_uniform;
    s.slash_spread = rng() % 2 ? Spread::uniform : Spread::log_uniform;
    const double target = std::uniform_real_distribution<double>(0.0, 0.6)(rng);
    const double share = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const int64_t max_v = int64_t(rng() % 600), max_s = int64_t(rng() % 600);
    const uint64_t seed = rng();
    Rng a(seed), b(seed);
    const HeadPattern fast = density_head(a, s, target, share, max_v, max_s);
    const HeadPattern ref = density_head_reference(b, s, target, share, max_v, max_s);
    ASSERT_EQ(fast.verticals(), ref.verticals()) << "case " << it;
    ASSERT_EQ(fast.slash_offsets(), ref.slash_offsets()) << "case " << it;
    ASSERT_EQ(fast.slashes(), ref.slashes()) << "case " << it;
    EXPECT_EQ(a(), b()) << "both consumed the same draws";
  }
}

}  // namespace
}  // namespace rm::sparsity
