#include "kernels/plan.hpp"

#include <algorithm>
#include <limits>

namespace rm::kernels {
namespace {

struct Run {
  std::int32_t begin, count, block, min_pos, max_pos;
};

// Cut rows into runs of at most `limit` rows; when `aligned`, a run also ends
// where the global index block changes.
std::vector<Run> cut(const std::vector<std::int32_t>& pos, int limit, bool aligned) {
  std::vector<Run> runs;
  const auto n = static_cast<std::int32_t>(pos.size());
  for (std::int32_t r = 0; r < n;) {
    Run run{r, 0, index_block(pos[static_cast<std::size_t>(r)]), std::numeric_limits<std::int32_t>::max(), -1};
    while (r < n && run.count < limit && (!aligned || index_block(pos[static_cast<std::size_t>(r)]) == run.block)) {
      run.min_pos = std::min(run.min_pos, pos[static_cast<std::size_t>(r)]);
      run.max_pos = std::max(run.max_pos, pos[static_cast<std::size_t>(r)]);
      ++run.count;
      ++r;
    }
    runs.push_back(run);
  }
  return runs;
}

}  // namespace

TilePlan make_plan(const TileShape& shape, const TileLayout& layout, const SparseIndex& index) {
  validate_tile(shape, layout, index);
  TilePlan plan;
  plan.shape = shape;
  plan.causal = layout.causal;
  plan.q_pos = layout.q_pos;
  plan.k_pos = layout.k_pos;
  const bool sparse = index.mode != SparseMode::dense;
  plan.per_head = sparse;

  const auto qruns = cut(layout.q_pos, kQueryRows, sparse);
  const auto kruns = cut(layout.k_pos, kKeyRows, sparse);
  for (const auto& q : qruns) {
    plan.seg_begin.push_back(q.begin);
    plan.seg_count.push_back(q.count);
  }

  // Local row of each key position, for gathering verticals.
  std::vector<std::pair<std::int32_t, std::int32_t>> row_of_pos;
  if (index.mode == SparseMode::vertical_slash) {
    for (std::int32_t r = 0; r < shape.rows_k; ++r) row_of_pos.emplace_back(layout.k_pos[static_cast<std::size_t>(r)], r);
    std::sort(row_of_pos.begin(), row_of_pos.end());
  }

  const int lists = sparse ? shape.heads_q : 1;
  plan.item_offsets.push_back(0);
  std::vector<std::int32_t> cols;
  for (int h = 0; h < lists; ++h) {
    for (const auto& q : qruns) {
      auto visible = [&](const Run& k) { return !layout.causal || k.min_pos <= q.max_pos; };
      for (const auto& k : kruns)
        if (visible(k) && (!sparse || block_selected(index, h, q.block, k.block)))
          plan.items.push_back({k.begin, static_cast<std::uint16_t>(k.count), 0});
      if (index.mode == SparseMode::vertical_slash) {
        cols.clear();
        for (std::int32_t v : index.vertical_slash[static_cast<std::size_t>(h)].verticals) {
          if (layout.causal && v > q.max_pos) break;  // sorted: the rest are in the future too
          if (block_selected(index, h, q.block, index_block(v))) continue;  // already in a computed block
          auto it = std::lower_bound(row_of_pos.begin(), row_of_pos.end(), std::make_pair(v, std::int32_t{-1}));
          if (it != row_of_pos.end() && it->first == v) cols.push_back(it->second);
        }
        std::sort(cols.begin(), cols.end());
        for (std::size_t c = 0; c < cols.size(); c += kKeyRows) {
          const auto n = std::min<std::size_t>(kKeyRows, cols.size() - c);
          plan.items.push_back({static_cast<std::int32_t>(plan.gathered_rows.size()), static_cast<std::uint16_t>(n), 1});
          plan.gathered_rows.insert(plan.gathered_rows.end(), cols.begin() + static_cast<std::ptrdiff_t>(c),
                                    cols.begin() + static_cast<std::ptrdiff_t>(c + n));
        }
      }
      plan.item_offsets.push_back(static_cast<std::int64_t>(plan.items.size()));
    }
  }
  return plan;
}

double TilePlan::computed_pairs() const {
  double pairs = 0;
  for (int h = 0; h < shape.heads_q; ++h)
    for (int s = 0; s < segments(); ++s) {
      const auto l = list_index(h, s);
      for (auto i = item_offsets[static_cast<std::size_t>(l)]; i < item_offsets[static_cast<std::size_t>(l) + 1]; ++i)
        pairs += static_cast<double>(seg_count[static_cast<std::size_t>(s)]) * items[static_cast<std::size_t>(i)].count;
    }
  return pairs;
}

double TilePlan::dense_causal_pairs() const {
  // Keys visible to each query row, counted exactly by sorting key positions.
  std::vector<std::int32_t> k = k_pos;
  std::sort(k.begin(), k.end());
  double pairs = 0;
  for (auto qp : q_pos)
    pairs += causal ? static_cast<double>(std::upper_bound(k.begin(), k.end(), qp) - k.begin())
                    : static_cast<double>(k.size());
  return pairs * shape.heads_q;
}

}  // namespace rm::kernels
