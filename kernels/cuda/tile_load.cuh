#pragma once
// Moving tiles into shared memory: query rows of a segment and key/value
// rows of a plan item (contiguous or gathered), zero-filled past the end.
#include "kernels/attention.hpp"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/tile_traits.cuh"

namespace rm::kernels::cuda::detail {

// Local key row r of an item.
__device__ __forceinline__ int item_row(const PlanView& plan, const PlanItem& item, int r) {
  return item.gathered ? plan.gathered_rows[item.begin + r] : item.begin + r;
}

// kRowsT rows of D bf16 from `base` (rows row_of(r), r < count) into a swizzled tile.
template <int D, int kRowsT, int kThreads, class RowOf>
__device__ __forceinline__ void load_tile(bf16* tile, const bf16* base, int count, RowOf row_of) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRowsT * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = r < count;
    const bf16* src = base + (valid ? static_cast<std::size_t>(row_of(r)) * D + c * 8 : 0);
    cp_async16(tile + swizzle<kChunks>(r, c), src, valid);
  }
}

// The item's key positions (kNoKey past the end) and, optionally, its local rows.
template <int kKeys>
__device__ __forceinline__ void load_key_meta(const PlanView& plan, const PlanItem& item, int* pos, int* rows) {
  for (int r = threadIdx.x; r < kKeys; r += blockDim.x) {
    const int row = r < item.count ? item_row(plan, item, r) : -1;
    pos[r] = row >= 0 ? plan.k_pos[row] : kNoKey;
    if (rows != nullptr) rows[r] = row;
  }
}

__device__ __forceinline__ PlanItem load_item(const PlanView& plan, std::int64_t i) {
  // One 8-byte load: PlanItem is {int32 begin, uint16 count, uint16 gathered}.
  const int2 raw = reinterpret_cast<const int2*>(plan.items)[i];
  PlanItem item;
  item.begin = raw.x;
  item.count = static_cast<std::uint16_t>(raw.y & 0xffff);
  item.gathered = static_cast<std::uint16_t>(static_cast<unsigned>(raw.y) >> 16);
  return item;
}

__device__ __forceinline__ std::int64_t list_of(const PlanView& plan, int head, int seg) {
  return (plan.per_head ? static_cast<std::int64_t>(head) * plan.segments : 0) + seg;
}

}  // namespace rm::kernels::cuda::detail
