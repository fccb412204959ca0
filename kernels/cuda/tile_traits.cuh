#pragma once
// Compile-time tile shapes of the CUDA attention kernels and their shared
// memory layout, with the reasons for each choice.
#include <cuda_bf16.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "kernels/plan.hpp"

namespace rm::kernels::cuda::detail {

using bf16 = __nv_bfloat16;

// A row of D bf16 is D/8 16-byte chunks. ldmatrix reads one chunk from 8
// consecutive rows; rows are 128 or 256 bytes apart, so unswizzled they
// all hit the same banks. XOR-ing the chunk index with (row % 8) spreads
// the 8 reads over 8 distinct bank groups: conflict-free.
template <int kChunks>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  static_assert(kChunks >= 8 && kChunks % 8 == 0, "the XOR touches the low 3 bits of the chunk index");
  return row * kChunks * 8 + ((chunk ^ (row & 7)) << 3);
}

template <int D>
struct Traits {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static constexpr int kDim = D;
  static constexpr int kRows = kQueryRows;  // 128 query rows per CTA: same segment as the plan
  static constexpr int kKeys = kKeyRows;    // 64 keys per step: S is 16x64 per warp = 32 fp32 registers
  static constexpr int kWarps = kRows / 16; // one warp per 16 rows, the mma M; no cross-warp softmax
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunks = D / 8;
  static_assert(kWarps == 8, "the backward splits the 64 x D dK/dV tile into 4 x 2 warp tiles");
  static_assert(kKeys % 16 == 0 && D % 32 == 0, "mma k-steps of 16 and backward halves of D/2");

  // Forward: Q, K, V tiles (K and V loads overlap the other's math) + key positions.
  static constexpr std::size_t kFwdSmem = (std::size_t(kRows) * D + 2 * std::size_t(kKeys) * D) * sizeof(bf16) +
                                          kKeys * sizeof(int);
  // Backward: Q, dO, double-buffered K and V, P and dS (bf16, 128x64) + positions and rows x2.
  static constexpr std::size_t kBwdSmem = (2 * std::size_t(kRows) * D + 4 * std::size_t(kKeys) * D +
                                           2 * std::size_t(kRows) * kKeys) * sizeof(bf16) +
                                          4 * kKeys * sizeof(int);
  static_assert(kBwdSmem <= 166912, "must fit sm_80's 163 KB of opt-in shared memory");
};

// Key positions of rows past the end of a chunk: masked for every query.
inline constexpr int kNoKey = INT_MAX;

}  // namespace rm::kernels::cuda::detail
