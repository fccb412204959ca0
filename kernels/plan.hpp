#pragma once
// Block iteration for one tile: which key rows each query segment visits,
// built once on the host from the global positions and the sparse index,
// and walked identically by the CPU and CUDA kernels.
//
// Query rows are cut into segments of at most kQueryRows consecutive local
// rows; key rows into chunks of at most kKeyRows. In sparse modes a segment
// or chunk never straddles a global 128-token index block, so "this block
// pair is selected" holds for the whole item and only the causal mask is
// left for the kernel. Verticals whose block is not selected are gathered
// into chunks of up to kKeyRows listed rows (MTraining's column gather).
#include <cstdint>
#include <vector>

#include "kernels/tile.hpp"

namespace rm::kernels {

inline constexpr int kQueryRows = 128;  // query rows per segment = CUDA CTA tile
inline constexpr int kKeyRows = 64;     // key rows per item = CUDA inner tile
static_assert(kIndexBlock % kQueryRows == 0 && kIndexBlock % kKeyRows == 0,
              "an aligned segment or chunk must fit inside one index block");

// One unit of work: a chunk of key rows for one query segment.
struct PlanItem {
  std::int32_t begin = 0;     // first local key row, or offset into gathered_rows
  std::uint16_t count = 0;    // rows in the chunk, 1..kKeyRows
  std::uint16_t gathered = 0; // 1: rows are gathered_rows[begin .. begin+count)
};
static_assert(sizeof(PlanItem) == 8, "read as one 8-byte word on the GPU");

struct TilePlan {
  TileShape shape;
  bool causal = true;
  std::vector<std::int32_t> q_pos, k_pos;         // copied from the layout
  std::vector<std::int32_t> seg_begin, seg_count;  // query segments
  bool per_head = false;                           // false: one item list shared by all heads (dense)
  std::vector<std::int64_t> item_offsets;          // CSR over (head if per_head) * segments + segment
  std::vector<PlanItem> items;
  std::vector<std::int32_t> gathered_rows;         // local key rows of gathered items

  int segments() const { return static_cast<int>(seg_begin.size()); }
  std::int64_t list_index(int head, int seg) const {
    return (per_head ? static_cast<std::int64_t>(head) * segments() : 0) + seg;
  }
  // (query row, key row) pairs inside computed items over all heads, masked
  // ones included: the work the kernels do, for FLOP/s and cost models.
  double computed_pairs() const;
  // Pairs a dense causal tile of the same layout would compute, for speed-ups.
  double dense_causal_pairs() const;
};

// Validates (validate_tile) and builds the plan.
TilePlan make_plan(const TileShape& shape, const TileLayout& layout, const SparseIndex& index);

}  // namespace rm::kernels
