// The frame sweep (frame_sweep.hpp) adds what the per-row owner sweep adds:
// for every frame length, on owner sequences made of a few random frames, of
// balanced partitions and of no structure at all, against a brute-force loop
// over (query block, offset) — zero tolerance. Then the block-unit counts on
// balanced partitions (which take the frame path) against the general
// enumeration and the materialised mask, and the choice of frames on the
// benchmark's geometry (what keeps 1M tokens x 64 ranks fast).
#include <gtest/gtest.h>

#include "sim/placement/token_partition.hpp"
#include "sim/sparsity/aligned_count.hpp"
#include "sim/sparsity/block_count.hpp"
#include "sim/sparsity/block_owners.hpp"
#include "sim/sparsity/frame_sweep.hpp"
#include "tests/support/sparsity_brute.hpp"

namespace rm::sparsity {
namespace {

using namespace testing;

struct Sweep {
  std::vector<int> q, k;  // owner per query block, per key block (-1: nobody)
  int wq = 0, wk = 0;
  int64_t r = 1;
  std::vector<int64_t> offset, pairs;
};

// Owners of n blocks: frames of len blocks drawn from `kinds` random frames, or no structure.
std::vector<int> random_owners(Rng& rng, int64_t n, int64_t len, int w, int kinds) {
  std::vector<std::vector<int>> alphabet(static_cast<size_t>(kinds));
  for (auto& fr : alphabet)
    for (int64_t x = 0; x < len; ++x) fr.push_back(static_cast<int>(uniform(rng, -1, w - 1)));
  std::vector<int> out;
  while (static_cast<int64_t>(out.size()) < n) {
    const auto& fr = alphabet[static_cast<size_t>(uniform(rng, 0, kinds - 1))];
    out.insert(out.end(), fr.begin(), fr.end());
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

Sweep random_sweep(Rng& rng) {
  Sweep s;
  s.r = uniform(rng, 1, 3);
  s.wq = static_cast<int>(uniform(rng, 1, 5));
  s.wk = static_cast<int>(uniform(rng, 1, 5));
  const int64_t nq = uniform(rng, 1, 40), len = uniform(rng, 1, 8);
  const int kinds = uniform(rng, 0, 3) == 0 ? 64 : static_cast<int>(uniform(rng, 1, 3));  // 64: hardly any repeats
  s.q = random_owners(rng, nq, len, s.wq, kinds);
  s.k = random_owners(rng, nq * s.r - uniform(rng, 0, 1) * uniform(rng, 0, s.r - 1), len * s.r, s.wk, kinds);
  for (int64_t j = -(s.r - 1); j < nq * s.r; ++j)  // the sweeps take offsets in [-(r - 1), key blocks)
    if (uniform(rng, 0, 2) == 0) {
      s.offset.push_back(j);
      s.pairs.push_back(uniform(rng, 0, 1000));
    }
  return s;
}

std::vector<TileCost> brute(const Sweep& s) {
  std::vector<TileCost> out(static_cast<size_t>(s.wq * s.wk));
  for (size_t i = 0; i < s.q.size(); ++i) {
    if (s.q[i] < 0) continue;
    for (size_t e = 0; e < s.offset.size(); ++e) {
      const int64_t j = static_cast<int64_t>(i) * s.r - s.offset[e];
      if (j < 0 || j >= static_cast<int64_t>(s.k.size()) || s.k[static_cast<size_t>(j)] < 0) continue;
      out[static_cast<size_t>(s.q[i] * s.wk + s.k[static_cast<size_t>(j)])] += TileCost{1, s.pairs[e]};
    }
  }
  return out;
}

TEST(FrameSweep, EveryFrameLengthEqualsBruteForce) {
  Rng rng(91);
  for (int iter = 0; iter < 300; ++iter) {
    const Sweep s = random_sweep(rng);
    const std::vector<TileCost> want = brute(s);
    for (int64_t p = 1; p <= static_cast<int64_t>(s.q.size()) + 1; ++p) {
      std::vector<TileCost> got(want.size());
      add_frame_blocks(make_frames(s.q, s.k, s.r, p), s.offset, s.pairs, s.wk, got);
      ASSERT_EQ(got, want) << "iter " << iter << " p " << p;
    }
  }
}

// add_relative_blocks with the frames its layout chose, and with none (the
// residue, segment and walk sweeps), equals brute force.
TEST(FrameSweep, RelativeBlocksWithAndWithoutFramesEqualBruteForce) {
  Rng rng(92);
  int framed = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const Sweep s = random_sweep(rng);
    AlignedLayout layout = aligned_layout({s.q, s.wq}, {s.k, s.wk}, {s.r, 1});
    framed += layout.frames.p > 0;
    const std::vector<TileCost> want = brute(s);
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<TileCost> got(want.size());
      add_relative_blocks(layout, s.r, s.offset, s.pairs, got);
      ASSERT_EQ(got, want) << "iter " << iter << (pass ? " without frames" : " with chosen frames");
      layout.frames = {};
    }
  }
  EXPECT_GT(framed, 30);  // both kinds of layout occur
  EXPECT_LT(framed, 270);
}

std::vector<TokenSet> balanced(Rng& rng, int64_t s, int w, int64_t g) {
  std::vector<bool> rev(static_cast<size_t>(s / (w * g)));
  for (size_t p = 0; p < rev.size(); ++p) rev[p] = uniform(rng, 0, 1) == 1;
  return placement::periodic_partition(s, w, g, rev);
}

// Block-unit heads on balanced partitions: the fast path (frames) equals the
// general enumeration of (segment, chunk) pairs and the materialised mask.
TEST(FrameSweep, BalancedBlockCostsEqualGeneralPathAndMask) {
  Rng rng(93);
  for (int iter = 0; iter < 60; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 6));
    const int64_t u = uniform(rng, iter % 3 == 0 ? 2 : 1, 24);  // block-sparse of 1-token blocks is token-unit
    const int64_t g = uniform(rng, 1, 3) * (uniform(rng, 0, 1) ? u : 1);  // chunks of whole slash blocks, or not
    const int64_t s = std::max<int64_t>(1, uniform(rng, 100, 600) / (w * g)) * w * g;
    const BlockShape shape{uniform(rng, 1, 40), uniform(rng, 1, 40)};
    const HeadPattern p = iter % 3 == 0 ? HeadPattern::block_sparse(u, random_intervals(rng, s / u + 1, 3), random_intervals(rng, s / u + 1, 8))
                                        : HeadPattern::vertical_slash(random_intervals(rng, s, 30),
                                                                      random_intervals(rng, s, 12).united(IntervalSet({{0, 1}})), u);
    const auto ranks = balanced(rng, s, w, g);
    const auto fast = block_costs(p, ranks, ranks, shape);
    ASSERT_EQ(fast, block_costs_general(p, ranks, ranks, shape)) << "iter " << iter;
    const Mask m(p, s);
    for (size_t a = 0; a < ranks.size(); ++a)
      for (size_t b = 0; b < ranks.size(); ++b)
        ASSERT_EQ(fast[a * ranks.size() + b], brute_count(m, ranks[a], ranks[b], shape)) << "iter " << iter;
  }
}

// Token-unit heads (windows, sinks, 1-token blocks) on balanced partitions (the aligned path) against the mask.
TEST(FrameSweep, BalancedAlignedCostsEqualMask) {
  Rng rng(94);
  for (int iter = 0; iter < 40; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 5));
    const int64_t bk = uniform(rng, 1, 6), bq = bk * uniform(rng, 1, 3), g = bq * uniform(rng, 1, 2);
    const int64_t s = std::max<int64_t>(1, uniform(rng, 100, 800) / (w * g)) * w * g;
    const HeadPattern p = iter % 3 == 0   ? HeadPattern::sliding_window(uniform(rng, 1, s))
                          : iter % 3 == 1 ? HeadPattern::a_shape(uniform(rng, 0, s / 4), uniform(rng, 1, s / 2))
                                          : HeadPattern::block_sparse(1, random_intervals(rng, s, 20), random_intervals(rng, s, 30));
    const auto ranks = balanced(rng, s, w, g);
    const auto got = pair_costs(p, ranks, {bq, bk});
    const Mask m(p, s);
    for (size_t a = 0; a < ranks.size(); ++a)
      for (size_t b = 0; b < ranks.size(); ++b)
        ASSERT_EQ(got[a * ranks.size() + b], brute_count(m, ranks[a], ranks[b], {bq, bk})) << "iter " << iter;
  }
}

// The benchmark's geometry: 1M tokens, 128-token chunks and slash blocks. A
// balanced partition over W ranks is two frames of W blocks per side (periods
// dealt forward or backward), found among all frame lengths.
TEST(FrameSweep, BalancedPartitionIsTwoFramesOfOnePeriod) {
  Rng rng(95);
  for (int w : {8, 64}) {
    const auto ranks = balanced(rng, int64_t(1) << 20, w, 128);
    const auto owners = block_owners(ranks, 128);
    ASSERT_TRUE(owners);
    const AlignedLayout layout = aligned_layout(*owners, *owners, {1, 1});
    EXPECT_EQ(layout.frames.p, w);
    EXPECT_EQ(layout.frames.q_types.size(), 2u);
    EXPECT_EQ(layout.frames.k_types.size(), 2u);
  }
}

}  // namespace
}  // namespace rm::sparsity
