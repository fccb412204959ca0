#include "kernels/tile.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace rm::kernels {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("attention tile: " + what); }

void check_sorted_in_range(const std::vector<std::int32_t>& v, std::int32_t limit, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= limit)
      fail(what + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " is outside [0, " +
           std::to_string(limit) + ")");
    if (i > 0 && v[i] <= v[i - 1])
      fail(what + " is not sorted strictly ascending at [" + std::to_string(i) + "] (" +
           std::to_string(v[i - 1]) + " then " + std::to_string(v[i]) + ")");
  }
}

}  // namespace

bool block_selected(const SparseIndex& index, int head, std::int32_t qb, std::int32_t kb) {
  switch (index.mode) {
    case SparseMode::dense:
      return true;
    case SparseMode::vertical_slash: {
      // The diagonal q-k=d crosses block pair (qb,kb) iff d is within 127 of (qb-kb)*128.
      const auto& s = index.vertical_slash[static_cast<std::size_t>(head)].slashes;
      const std::int64_t centre = static_cast<std::int64_t>(qb - kb) * kIndexBlock;
      auto it = std::lower_bound(s.begin(), s.end(), centre - (kIndexBlock - 1));
      return it != s.end() && *it <= centre + (kIndexBlock - 1);
    }
    case SparseMode::block_mask: {
      const auto& rows = index.block_mask[static_cast<std::size_t>(head)].rows;
      if (qb < 0 || static_cast<std::size_t>(qb) >= rows.size()) return false;
      const auto& r = rows[static_cast<std::size_t>(qb)];
      return std::binary_search(r.begin(), r.end(), kb);
    }
  }
  return false;
}

bool attends(const SparseIndex& index, int head, std::int32_t qp, std::int32_t kp, bool causal) {
  if (causal && kp > qp) return false;
  if (block_selected(index, head, index_block(qp), index_block(kp))) return true;
  if (index.mode != SparseMode::vertical_slash) return false;
  const auto& v = index.vertical_slash[static_cast<std::size_t>(head)].verticals;
  return std::binary_search(v.begin(), v.end(), kp);
}

void validate_tile(const TileShape& shape, const TileLayout& layout, const SparseIndex& index) {
  if (shape.heads_q <= 0 || shape.heads_kv <= 0) fail("head counts must be positive");
  if (shape.heads_q % shape.heads_kv != 0)
    fail("heads_q (" + std::to_string(shape.heads_q) + ") is not a multiple of heads_kv (" +
         std::to_string(shape.heads_kv) + ")");
  if (shape.head_dim != 64 && shape.head_dim != 128)
    fail("head_dim " + std::to_string(shape.head_dim) + " is not supported (64 or 128)");
  if (shape.rows_q < 0 || shape.rows_k < 0) fail("row counts must not be negative");
  if (layout.q_pos.size() != static_cast<std::size_t>(shape.rows_q))
    fail("q_pos has " + std::to_string(layout.q_pos.size()) + " entries, rows_q is " + std::to_string(shape.rows_q));
  if (layout.k_pos.size() != static_cast<std::size_t>(shape.rows_k))
    fail("k_pos has " + std::to_string(layout.k_pos.size()) + " entries, rows_k is " + std::to_string(shape.rows_k));
  if (layout.seq_len <= 0) fail("seq_len must be positive");
  auto check_pos = [&](const std::vector<std::int32_t>& p, const char* name) {
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p[i] < 0 || p[i] >= layout.seq_len)
        fail(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(p[i]) + " is outside [0, " +
             std::to_string(layout.seq_len) + ")");
  };
  check_pos(layout.q_pos, "q_pos");
  check_pos(layout.k_pos, "k_pos");

  const auto heads = static_cast<std::size_t>(shape.heads_q);
  switch (index.mode) {
    case SparseMode::dense:
      break;
    case SparseMode::vertical_slash: {
      if (index.vertical_slash.size() != heads)
        fail("vertical-slash index has " + std::to_string(index.vertical_slash.size()) + " heads, tile has " +
             std::to_string(heads) + " query heads");
      for (std::size_t h = 0; h < heads; ++h) {
        const std::string at = "head " + std::to_string(h) + " ";
        check_sorted_in_range(index.vertical_slash[h].verticals, layout.seq_len, at + "verticals");
        check_sorted_in_range(index.vertical_slash[h].slashes, layout.seq_len, at + "slashes");
      }
      // Verticals are gathered by position, so a position must name one row.
      std::unordered_set<std::int32_t> seen(layout.k_pos.begin(), layout.k_pos.end());
      if (seen.size() != layout.k_pos.size()) fail("k_pos repeats a position; sparse tiles need unique key positions");
      break;
    }
    case SparseMode::block_mask: {
      if (index.block_mask.size() != heads)
        fail("block mask has " + std::to_string(index.block_mask.size()) + " heads, tile has " +
             std::to_string(heads) + " query heads");
      const std::int32_t nb = index_blocks(layout.seq_len);
      for (std::size_t h = 0; h < heads; ++h) {
        const auto& rows = index.block_mask[h].rows;
        if (rows.size() != static_cast<std::size_t>(nb))
          fail("block mask head " + std::to_string(h) + " has " + std::to_string(rows.size()) +
               " query-block rows, seq_len needs " + std::to_string(nb));
        for (std::size_t qb = 0; qb < rows.size(); ++qb)
          check_sorted_in_range(rows[qb], nb, "block mask head " + std::to_string(h) + " row " + std::to_string(qb));
      }
      break;
    }
  }
}

std::string to_string(SparseMode mode) {
  switch (mode) {
    case SparseMode::dense: return "dense";
    case SparseMode::vertical_slash: return "vertical_slash";
    case SparseMode::block_mask: return "block_mask";
  }
  return "?";
}

}  // namespace rm::kernels
