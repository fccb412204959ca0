// The model counts what the kernels execute: for random partitions and
// vertical-slash / block-sparse heads, pair_costs' tiles equal the items of
// kernels::make_plan (block items and gathered vertical chunks) and its
// non-zeros the pairs kernels::attends accepts — zero tolerance. And on the
// layout MTraining runs (stripes of 128), they equal the tiles its Triton
// kernel executes, counted from its index conversion (mtraining_oracle.hpp).
#include <gtest/gtest.h>

#include "kernels/plan.hpp"
#include "sim/sparsity/block_count.hpp"
#include "tests/support/mtraining_oracle.hpp"
#include "tests/support/sparsity_brute.hpp"

namespace rm::sparsity {
namespace {

using namespace testing;

std::vector<int32_t> points(Rng& rng, int64_t limit, int n, bool with_zero) {
  std::vector<int32_t> v;
  if (with_zero) v.push_back(0);
  for (int i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(uniform(rng, 0, limit - 1)));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

IntervalSet as_set(const std::vector<int32_t>& v) { return IntervalSet::from_points({v.begin(), v.end()}); }

std::vector<TokenSet> random_layout(Rng& rng, int64_t s, int w) {
  switch (uniform(rng, 0, 4)) {
    case 0: return contiguous(s, w);
    case 1: return zigzag(s, w);
    case 2: return random_runs(rng, s, w, uniform(rng, 1, 200));  // any local order: the general path
    default: {
      const int64_t g = uniform(rng, 1, 300);  // stripes of any width, 1 token included
      return stripe(s / (w * g) * w * g, w, g);
    }
  }
}

struct KernelCount {
  int64_t items = 0, pairs = 0;
};

KernelCount kernel_count(const kernels::SparseIndex& index, const TokenSet& q, const TokenSet& k, int64_t s) {
  kernels::TileLayout layout;
  for (int64_t t : q.tokens()) layout.q_pos.push_back(static_cast<int32_t>(t));
  for (int64_t t : k.tokens()) layout.k_pos.push_back(static_cast<int32_t>(t));
  layout.seq_len = static_cast<int32_t>(s);
  const kernels::TileShape shape{1, 1, 128, static_cast<int>(layout.q_pos.size()), static_cast<int>(layout.k_pos.size())};
  const kernels::TilePlan plan = kernels::make_plan(shape, layout, index);
  KernelCount c{static_cast<int64_t>(plan.items.size()), 0};
  for (int32_t a : layout.q_pos)
    for (int32_t b : layout.k_pos) c.pairs += kernels::attends(index, 0, a, b, true);
  return c;
}

void expect_equal(const HeadPattern& p, const kernels::SparseIndex& index, const std::vector<TokenSet>& ranks, int64_t s,
                  const std::string& what) {
  const auto model = pair_costs(p, ranks, {});
  for (size_t a = 0; a < ranks.size(); ++a)
    for (size_t b = 0; b < ranks.size(); ++b) {
      const KernelCount want = kernel_count(index, ranks[a], ranks[b], s);
      const TileCost& have = model[a * ranks.size() + b];
      ASSERT_EQ(have.blocks, want.items) << what << " pair " << a << "," << b;
      ASSERT_EQ(have.nnz, want.pairs) << what << " pair " << a << "," << b;
    }
}

TEST(SparsityKernelPlan, VerticalSlashTilesEqualPlanItems) {
  Rng rng(81);
  for (int iter = 0; iter < 40; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 5));
    const int64_t s = uniform(rng, 300, 3000);
    const auto v = points(rng, s, static_cast<int>(uniform(rng, 0, 150)), false);
    const auto d = points(rng, s, static_cast<int>(uniform(rng, 0, 20)), iter % 4 != 0);  // sometimes no main diagonal
    kernels::SparseIndex index;
    index.mode = kernels::SparseMode::vertical_slash;
    index.vertical_slash.push_back({v, d});
    expect_equal(HeadPattern::vertical_slash(as_set(v), as_set(d)), index, random_layout(rng, s, w), s,
                 "iter " + std::to_string(iter));
  }
}

TEST(SparsityKernelPlan, BlockSparseTilesEqualPlanItems) {
  Rng rng(82);
  for (int iter = 0; iter < 30; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 5));
    const int64_t s = uniform(rng, 300, 3000), nb = (s + 127) / 128;
    const IntervalSet cols = random_intervals(rng, nb, 3), diags = random_intervals(rng, nb, 5);
    const HeadPattern p = HeadPattern::block_sparse(128, cols, diags);
    kernels::SparseIndex index;
    index.mode = kernels::SparseMode::block_mask;
    index.block_mask.emplace_back();
    for (int64_t qb = 0; qb < nb; ++qb) {
      std::vector<int32_t> row;
      for (int64_t kb = 0; kb < nb; ++kb)
        if (diags.contains(qb - kb) || cols.contains(kb)) row.push_back(static_cast<int32_t>(kb));
      index.block_mask[0].rows.push_back(std::move(row));
    }
    expect_equal(p, index, random_layout(rng, s, w), s, "iter " + std::to_string(iter));
  }
}

// The fast (class) path against the general enumeration on increasing local
// orders, small slash blocks and tile shapes of every kind.
TEST(SparsityKernelPlan, FastPathEqualsGeneralPath) {
  Rng rng(83);
  for (int iter = 0; iter < 80; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 6));
    const int64_t u = uniform(rng, 1, 40), s = uniform(rng, 50, 1500);
    const BlockShape shape{uniform(rng, 1, 50), uniform(rng, 1, 50)};
    const HeadPattern p = iter % 3 == 0 ? HeadPattern::block_sparse(u, random_intervals(rng, s / u + 1, 3), random_intervals(rng, s / u + 1, 6))
                                        : HeadPattern::vertical_slash(random_intervals(rng, s, 30),
                                                                      random_intervals(rng, s, 20).united(IntervalSet({{0, 1}})), u);
    std::vector<TokenSet> ranks;
    if (iter % 2 == 0) {
      ranks = contiguous(s, w);
    } else {
      const int64_t g = uniform(rng, 1, 60);
      ranks = stripe(std::max<int64_t>(1, s / (w * g)) * w * g, w, g);
    }
    ASSERT_EQ(block_costs(p, ranks, ranks, shape), block_costs_general(p, ranks, ranks, shape)) << "iter " << iter;
  }
}

// The gathered-vertical sweeps (dense walk, events spread by the query
// classes' period, and per period position for key sets of at most Bk
// verticals) give the same counts as each other and as the general
// enumeration, on stripes of every width (periods of one or many blocks),
// contiguous ranks (no period shorter than the sequence) and query sets
// unlike the key sets; power-of-two and other Bk.
TEST(SparsityKernelPlan, GatherSweepsAgree) {
  Rng rng(85);
  for (int iter = 0; iter < 300; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 8));
    const int64_t u = uniform(rng, 1, 5) * (iter % 2 ? 8 : 1), s = uniform(rng, 50, 2500);
    const BlockShape shape{uniform(rng, 1, 40), iter % 4 == 0 ? uniform(rng, 1, 40) : int64_t(1) << uniform(rng, 0, 5)};
    // Every third head has a few single-token verticals, so that key sets of at most
    // Bk verticals (the few_verticals sweep) come up as often as larger ones.
    const IntervalSet verticals = iter % 3 == 1 ? as_set(points(rng, s, static_cast<int>(uniform(rng, 1, 3 * w)), false))
                                                : random_intervals(rng, s, static_cast<int>(uniform(rng, 1, 60)));
    const HeadPattern p = HeadPattern::vertical_slash(verticals,
                                                      random_intervals(rng, s, static_cast<int>(uniform(rng, 1, 40))).united(IntervalSet({{0, 1}})), u);
    std::vector<TokenSet> ranks;
    if (iter % 5 == 0) {
      ranks = contiguous(s, w);
    } else {
      const int64_t g = uniform(rng, 1, 3) == 1 ? uniform(rng, 1, 60) : u * uniform(rng, 1, 3);
      ranks = stripe(std::max<int64_t>(1, s / (w * g)) * w * g, w, g);
    }
    std::vector<TokenSet> keys = ranks;
    if (iter % 7 == 0) keys.resize(std::max<size_t>(1, keys.size() / 2));  // fewer key sets than query sets
    const std::string at = "iter " + std::to_string(iter);
    const auto dense = block_costs(p, ranks, keys, shape, GatherSweep::dense);
    ASSERT_EQ(dense, block_costs(p, ranks, keys, shape, GatherSweep::events)) << at;
    ASSERT_EQ(dense, block_costs(p, ranks, keys, shape, GatherSweep::few_verticals)) << at;
    ASSERT_EQ(dense, block_costs(p, ranks, keys, shape, GatherSweep::automatic)) << at;
    if (iter % 3 == 0) {
      ASSERT_EQ(dense, block_costs_general(p, ranks, keys, shape)) << at;
    }
  }
}

// MTraining's stripe ring (128-token stripes): per (rank, KV owner), the tiles
// its kernel runs equal the model's; checked on its own layout only.
TEST(SparsityKernelPlan, StripeTilesEqualMTrainingKernel) {
  Rng rng(84);
  for (int iter = 0; iter < 20; ++iter) {
    const int w = static_cast<int>(uniform(rng, 1, 6));
    const int64_t local_blocks = uniform(rng, 1, 6), s = local_blocks * w * 128;
    const auto v = points(rng, s, static_cast<int>(uniform(rng, 0, 300)), false);
    const auto d = points(rng, s, static_cast<int>(uniform(rng, 0, 40)), true);  // its local window keeps diagonal 0
    const auto model = pair_costs(HeadPattern::vertical_slash(as_set(v), as_set(d)), stripe(s, w, 128), {});
    const std::vector<int64_t> v64(v.begin(), v.end()), d64(d.begin(), d.end());
    for (int r = 0; r < w; ++r)
      for (int owner = 0; owner < w; ++owner)
        ASSERT_EQ(model[static_cast<size_t>(r * w + owner)].blocks, mtraining::stripe_tiles(v64, d64, w, r, owner, s))
            << "iter " << iter << " rank " << r << " kv owner " << owner;
  }
}

}  // namespace
}  // namespace rm::sparsity
