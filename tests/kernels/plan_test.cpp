// Mask semantics and block iteration: every attended (query, key) pair is
// computed exactly once, and nothing else survives the causal mask.
#include <gtest/gtest.h>

#include "kernels/plan.hpp"
#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

TEST(Mask, SlashSelectsTheBlocksItsDiagonalCrosses) {
  SparseIndex idx;
  idx.mode = SparseMode::vertical_slash;
  idx.vertical_slash.push_back({{}, {0}});
  idx.vertical_slash.push_back({{}, {127}});
  idx.vertical_slash.push_back({{}, {128}});
  idx.vertical_slash.push_back({{}, {300}});
  EXPECT_TRUE(block_selected(idx, 0, 3, 3));
  EXPECT_FALSE(block_selected(idx, 0, 3, 2));
  EXPECT_TRUE(block_selected(idx, 1, 3, 3));
  EXPECT_TRUE(block_selected(idx, 1, 3, 2));
  EXPECT_FALSE(block_selected(idx, 2, 3, 3));
  EXPECT_TRUE(block_selected(idx, 2, 3, 2));
  EXPECT_FALSE(block_selected(idx, 2, 3, 1));
  EXPECT_TRUE(block_selected(idx, 3, 5, 3));   // 300 in (256 +- 127)
  EXPECT_TRUE(block_selected(idx, 3, 5, 2));   // 300 in (384 +- 127)
  EXPECT_FALSE(block_selected(idx, 3, 5, 4));  // 300 not in (128 +- 127)
}

TEST(Mask, VerticalsCausalityAndBlockMask) {
  SparseIndex vs;
  vs.mode = SparseMode::vertical_slash;
  vs.vertical_slash.push_back({{5, 700}, {0}});
  EXPECT_TRUE(attends(vs, 0, 1000, 5, true));
  EXPECT_FALSE(attends(vs, 0, 600, 700, true));  // vertical in the future
  EXPECT_TRUE(attends(vs, 0, 600, 700, false));
  EXPECT_FALSE(attends(vs, 0, 1000, 6, true));
  EXPECT_TRUE(attends(vs, 0, 1000, 900, true));   // same block as the main diagonal
  EXPECT_FALSE(attends(vs, 0, 1000, 1001, true));
  SparseIndex bm;
  bm.mode = SparseMode::block_mask;
  bm.block_mask.push_back({{{0}, {}, {0, 2}}});
  EXPECT_TRUE(attends(bm, 0, 300, 10, true));
  EXPECT_FALSE(attends(bm, 0, 300, 130, true));
  EXPECT_TRUE(attends(bm, 0, 300, 299, true));
  EXPECT_FALSE(attends(bm, 0, 200, 10, true));
}

// Count how often each (head, q row, k row) pair is visited by the plan's
// items with the causal mask applied; compare with the exact mask.
void expect_exact_cover(const TileShape& shape, const TileLayout& layout, const SparseIndex& index) {
  const TilePlan plan = make_plan(shape, layout, index);
  ASSERT_EQ(plan.item_offsets.size(),
            static_cast<std::size_t>((plan.per_head ? shape.heads_q : 1) * plan.segments() + 1));
  const bool sparse = index.mode != SparseMode::dense;
  for (int s = 0; s < plan.segments(); ++s) {
    ASSERT_LE(plan.seg_count[static_cast<std::size_t>(s)], kQueryRows);
    if (!sparse) continue;
    for (int r = 1; r < plan.seg_count[static_cast<std::size_t>(s)]; ++r) {
      ASSERT_EQ(index_block(layout.q_pos[static_cast<std::size_t>(plan.seg_begin[static_cast<std::size_t>(s)] + r)]),
                index_block(layout.q_pos[static_cast<std::size_t>(plan.seg_begin[static_cast<std::size_t>(s)])]));
    }
  }
  std::vector<int> hits(static_cast<std::size_t>(shape.rows_q) * static_cast<std::size_t>(shape.rows_k));
  for (int h = 0; h < shape.heads_q; ++h) {
    std::fill(hits.begin(), hits.end(), 0);
    for (int s = 0; s < plan.segments(); ++s) {
      const auto l = static_cast<std::size_t>(plan.list_index(h, s));
      for (auto i = plan.item_offsets[l]; i < plan.item_offsets[l + 1]; ++i) {
        const PlanItem& it = plan.items[static_cast<std::size_t>(i)];
        ASSERT_GE(it.count, 1);
        ASSERT_LE(it.count, kKeyRows);
        for (int r = 0; r < plan.seg_count[static_cast<std::size_t>(s)]; ++r)
          for (int c = 0; c < it.count; ++c) {
            const auto qr = static_cast<std::size_t>(plan.seg_begin[static_cast<std::size_t>(s)] + r);
            const auto kr = static_cast<std::size_t>(
                it.gathered ? plan.gathered_rows[static_cast<std::size_t>(it.begin + c)] : it.begin + c);
            if (!layout.causal || layout.k_pos[kr] <= layout.q_pos[qr]) ++hits[qr * static_cast<std::size_t>(shape.rows_k) + kr];
          }
      }
    }
    for (int qr = 0; qr < shape.rows_q; ++qr)
      for (int kr = 0; kr < shape.rows_k; ++kr) {
        const bool want = attends(index, h, layout.q_pos[static_cast<std::size_t>(qr)],
                                  layout.k_pos[static_cast<std::size_t>(kr)], layout.causal);
        ASSERT_EQ(hits[static_cast<std::size_t>(qr) * static_cast<std::size_t>(shape.rows_k) + static_cast<std::size_t>(kr)],
                  want ? 1 : 0)
            << "head " << h << " q row " << qr << " k row " << kr;
      }
  }
}

TEST(Plan, CoversExactlyTheMaskAcrossLayouts) {
  const std::int32_t seq = 1000;  // not a multiple of 128: ragged last block
  const TileShape shape{2, 1, 64, 0, 0};
  for (const char* kind : {"contiguous", "zigzag", "stripe"})
    for (int qrank : {0, 2})
      for (int krank : {1, 2}) {
        TileLayout layout;
        layout.seq_len = seq;
        layout.q_pos = test::partition_pos(kind, seq, 3, qrank, 100);  // stripe of 100: blocks straddle
        layout.k_pos = test::partition_pos(kind, seq, 3, krank, 100);
        TileShape s = shape;
        s.rows_q = static_cast<int>(layout.q_pos.size());
        s.rows_k = static_cast<int>(layout.k_pos.size());
        SCOPED_TRACE(std::string(kind) + " q" + std::to_string(qrank) + " k" + std::to_string(krank));
        expect_exact_cover(s, layout, SparseIndex{});
        expect_exact_cover(s, layout, test::random_vertical_slash(2, seq, 40, 6, 7));
        expect_exact_cover(s, layout, test::random_block_mask(2, seq, 0.3, 9));
        layout.causal = false;
        expect_exact_cover(s, layout, test::random_vertical_slash(2, seq, 40, 6, 11));
      }
}

TEST(Plan, EmptyIndexRowsAndEmptyTiles) {
  TileLayout layout;
  layout.seq_len = 512;
  layout.q_pos = test::iota_pos(384, 128);
  layout.k_pos = test::iota_pos(0, 128);
  SparseIndex idx;  // slash 10 selects block distances 0 and 1; these blocks are 3 apart
  idx.mode = SparseMode::vertical_slash;
  idx.vertical_slash.push_back({{}, {10}});
  const TileShape shape{1, 1, 128, 128, 128};
  const TilePlan plan = make_plan(shape, layout, idx);
  EXPECT_EQ(plan.items.size(), 0u);
  EXPECT_EQ(plan.computed_pairs(), 0.0);
  const TilePlan none = make_plan({1, 1, 128, 0, 0}, {{}, {}, 512, true}, SparseIndex{});
  EXPECT_EQ(none.segments(), 0);
}

TEST(Plan, ComputedPairsShrinkWithSparsity) {
  TileLayout layout;
  layout.seq_len = 4096;
  layout.q_pos = test::iota_pos(0, 4096);
  layout.k_pos = layout.q_pos;
  const TileShape shape{1, 1, 128, 4096, 4096};
  const TilePlan dense = make_plan(shape, layout, SparseIndex{});
  EXPECT_DOUBLE_EQ(dense.dense_causal_pairs(), 4096.0 * 4097.0 / 2);
  // Segment s (128 rows) visits key chunks 0..2s+1 (64 rows each): 128*128*(s+1) pairs.
  EXPECT_DOUBLE_EQ(dense.computed_pairs(), 128.0 * 128.0 * (32 * 33 / 2));
  const TilePlan sparse = make_plan(shape, layout, test::random_vertical_slash(1, 4096, 16, 2, 3));
  EXPECT_LT(sparse.computed_pairs(), 0.5 * dense.computed_pairs());
}

}  // namespace
}  // namespace rm::kernels
