// Backward: one CTA per (query segment, query head), walking the same plan
// items as the forward (query-major). Per item: S = QK^T and P from the saved
// LSE, dP = dO V^T, dS = P (dP - delta); dQ += dS K stays in registers;
// dK += dS^T Q and dV += P^T dO are reduced over the CTA's 128 rows through
// shared memory and added to global fp32 with atomics. K/V of item i+1
// load while item i computes (double buffer).
#include <cmath>

#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/tile_load.cuh"

namespace rm::kernels::cuda::detail {
namespace {

template <int D>
__global__ void __launch_bounds__(Traits<D>::kThreads) backward_kernel(const AttentionParams p) {
  using T = Traits<D>;
  constexpr int kC = T::kChunks;
  constexpr int kPC = T::kKeys / 8;  // chunks per row of the 128 x 64 P and dS tiles
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sdO = sQ + T::kRows * D;
  bf16* sK = sdO + T::kRows * D;      // [2][kKeys][D]
  bf16* sV = sK + 2 * T::kKeys * D;   // [2][kKeys][D]
  bf16* sP = sV + 2 * T::kKeys * D;   // [kRows][kKeys]
  bf16* sdS = sP + T::kRows * T::kKeys;
  int* sPos = reinterpret_cast<int*>(sdS + T::kRows * T::kKeys);  // [2][kKeys]
  int* sRow = sPos + 2 * T::kKeys;                                   // [2][kKeys]

  const int seg = blockIdx.x, head = blockIdx.y;
  const int kv = head / (p.heads_q / p.heads_kv);
  const int r0 = p.plan.seg_begin[seg], rows = p.plan.seg_count[seg];
  const std::int64_t list = list_of(p.plan, head, seg);
  const std::int64_t first = p.plan.item_offsets[list], last = p.plan.item_offsets[list + 1];
  const std::size_t qrow0 = static_cast<std::size_t>(head) * p.rows_q + r0;
  const std::size_t krow0 = static_cast<std::size_t>(kv) * p.rows_k;
  const bf16* k = static_cast<const bf16*>(p.k) + krow0 * D;
  const bf16* v = static_cast<const bf16*>(p.v) + krow0 * D;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;

  auto issue = [&](std::int64_t i) {
    if (i < last) {
      const int b = static_cast<int>(i - first) & 1;
      const PlanItem item = load_item(p.plan, i);
      auto row_of = [&](int r) { return item_row(p.plan, item, r); };
      load_tile<D, T::kKeys, T::kThreads>(sK + b * T::kKeys * D, k, item.count, row_of);
      load_tile<D, T::kKeys, T::kThreads>(sV + b * T::kKeys * D, v, item.count, row_of);
      load_key_meta<T::kKeys>(p.plan, item, sPos + b * T::kKeys, sRow + b * T::kKeys);
    }
    cp_async_commit();
  };
  load_tile<D, T::kRows, T::kThreads>(sQ, static_cast<const bf16*>(p.q) + qrow0 * D, rows, [](int r) { return r; });
  load_tile<D, T::kRows, T::kThreads>(sdO, static_cast<const bf16*>(p.dout) + qrow0 * D, rows, [](int r) { return r; });
  cp_async_commit();

  // Per row: causal limit, LSE in log2 units (+inf for empty rows: P = 0), and
  // delta = dO . O, the softmax-backward correction, from the merged output.
  int limit[2];
  float lse2[2], delta[2] = {0.f, 0.f};
  for (int h = 0; h < 2; ++h) {
    const int row = warp * 16 + g + 8 * h;
    limit[h] = !p.causal ? kNoKey - 1 : (row < rows ? p.plan.q_pos[r0 + row] : -1);
    const float lse = row < rows ? p.lse_in[qrow0 + row] : -INFINITY;
    lse2[h] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
  }
  for (int r = 0; r < 16; ++r) {
    const int row = warp * 16 + r;
    float acc = 0.f;
    if (row < rows) {
      const bf16* dout = static_cast<const bf16*>(p.dout) + (qrow0 + row) * D;
      const float* out = p.out_in + (qrow0 + row) * D;
      for (int d = lane; d < D; d += 32) acc += __bfloat162float(dout[d]) * out[d];
    }
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (r == g) delta[0] = acc;
    if (r == g + 8) delta[1] = acc;
  }

  issue(first);
  float dq[D / 8][4] = {};
  for (std::int64_t i = first; i < last; ++i) {
    const int b = static_cast<int>(i - first) & 1;
    const bf16* cK = sK + b * T::kKeys * D;
    const bf16* cV = sV + b * T::kKeys * D;
    issue(i + 1);
    cp_async_wait<1>();
    __syncthreads();  // item i (and Q, dO) visible

    float s[T::kKeys / 8][4] = {}, dp[T::kKeys / 8][4] = {};
    // Not unrolled: with dQ's accumulators live, hoisted fragment loads would spill.
#pragma unroll 1
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t aq[4], ad[4];
      ldmatrix_x4(aq, sQ + swizzle<kC>(warp * 16 + lane % 16, kk * 2 + lane / 16));
      ldmatrix_x4(ad, sdO + swizzle<kC>(warp * 16 + lane % 16, kk * 2 + lane / 16));
#pragma unroll
      for (int n2 = 0; n2 < T::kKeys / 16; ++n2) {
        const int at = swizzle<kC>(n2 * 16 + (lane / 16) * 8 + lane % 8, kk * 2 + (lane / 8) % 2);
        std::uint32_t bk[4], bv[4];
        ldmatrix_x4(bk, cK + at);
        ldmatrix_x4(bv, cV + at);
        mma_bf16(s[2 * n2], aq, bk[0], bk[1]);
        mma_bf16(s[2 * n2 + 1], aq, bk[2], bk[3]);
        mma_bf16(dp[2 * n2], ad, bv[0], bv[1]);
        mma_bf16(dp[2 * n2 + 1], ad, bv[2], bv[3]);
      }
    }
    // P and dS (unscaled; the softmax scale is applied once to dQ and dK), kept
    // in registers for dQ and stored for the dK/dV reduction.
    const int* pos = sPos + b * T::kKeys;
#pragma unroll
    for (int n = 0; n < T::kKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool visible = pos[n * 8 + 2 * t + (e & 1)] <= limit[e / 2];
        s[n][e] = visible ? exp2f(s[n][e] * scale_log2 - lse2[e / 2]) : 0.f;
        dp[n][e] = s[n][e] * (dp[n][e] - delta[e / 2]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + g + 8 * h;
        const int at = row * T::kKeys + ((n ^ (row & 7)) << 3) + 2 * t;
        *reinterpret_cast<std::uint32_t*>(sP + at) = pack_bf16(s[n][2 * h], s[n][2 * h + 1]);
        *reinterpret_cast<std::uint32_t*>(sdS + at) = pack_bf16(dp[n][2 * h], dp[n][2 * h + 1]);
      }
    }
    // dQ += dS K
#pragma unroll
    for (int kk = 0; kk < T::kKeys / 16; ++kk) {
      std::uint32_t a[4];
      accum_to_a(a, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int d2 = 0; d2 < D / 16; ++d2) {
        std::uint32_t bk[4];
        ldmatrix_x4_trans(bk, cK + swizzle<kC>(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8, d2 * 2 + lane / 16));
        mma_bf16(dq[2 * d2], a, bk[0], bk[1]);
        mma_bf16(dq[2 * d2 + 1], a, bk[2], bk[3]);
      }
    }
    __syncthreads();  // sP and sdS complete

    // dV = P^T dO, then dK = dS^T Q, for the item's 64 keys: warp w owns keys
    // 16 (w % 4) .. +16 and head-dim half w / 4, reducing over all 128 rows.
    // One product at a time keeps 32 accumulators live next to dQ's 64 (no spills).
    {
      const int key0 = (warp % 4) * 16, half = warp / 4;
      const int* krow = sRow + b * T::kKeys;
      auto reduce_keys = [&](const bf16* sA, const bf16* sB, float* grad, float scale) {
        float acc[D / 16][4] = {};
#pragma unroll
        for (int kk = 0; kk < T::kRows / 16; ++kk) {
          std::uint32_t a[4];
          const int mi = lane / 8;
          ldmatrix_x4_trans(a, sA + swizzle<kPC>(kk * 16 + (mi / 2) * 8 + lane % 8, key0 / 8 + mi % 2));
#pragma unroll
          for (int d2 = 0; d2 < D / 32; ++d2) {
            std::uint32_t bb[4];
            ldmatrix_x4_trans(bb, sB + swizzle<kC>(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8,
                                                   half * (D / 16) + d2 * 2 + lane / 16));
            mma_bf16(acc[2 * d2], a, bb[0], bb[1]);
            mma_bf16(acc[2 * d2 + 1], a, bb[2], bb[3]);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = krow[key0 + g + 8 * h];
          if (row < 0) continue;
          float* out = grad + (krow0 + row) * D + half * (D / 2) + 2 * t;
#pragma unroll
          for (int n = 0; n < D / 16; ++n) {
            atomicAdd(out + n * 8, acc[n][2 * h] * scale);
            atomicAdd(out + n * 8 + 1, acc[n][2 * h + 1] * scale);
          }
        }
      };
      reduce_keys(sP, sdO, p.dv, 1.f);
      reduce_keys(sdS, sQ, p.dk, p.softmax_scale);
    }
    __syncthreads();  // buffers b, sP and sdS free for the next items
  }
  cp_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = warp * 16 + g + 8 * h;
    if (row >= rows) continue;
    float* out = p.dq + (qrow0 + row) * D + 2 * t;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      float2 old = p.accumulate ? *reinterpret_cast<const float2*>(out + d * 8) : make_float2(0.f, 0.f);
      old.x += dq[d][2 * h] * p.softmax_scale;
      old.y += dq[d][2 * h + 1] * p.softmax_scale;
      *reinterpret_cast<float2*>(out + d * 8) = old;
    }
  }
}

template <int D>
void launch(const AttentionParams& p, cudaStream_t stream) {
  using T = Traits<D>;
  check(cudaFuncSetAttribute(backward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::kBwdSmem)),
        "backward smem attribute");
  backward_kernel<D><<<dim3(static_cast<unsigned>(p.plan.segments), static_cast<unsigned>(p.heads_q)), T::kThreads,
                       T::kBwdSmem, stream>>>(p);
  check(cudaGetLastError(), "backward launch");
}

}  // namespace

void launch_backward(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_dim == 64) launch<64>(p, stream);
  else launch<128>(p, stream);
}

}  // namespace rm::kernels::cuda::detail
