// Forward: one CTA per (query segment, query head); 8 warps x 16 query rows;
// walks the plan's items (64 keys each) with an online softmax in registers.
// K(i+1) loads while P.V(i) runs and V(i+1) while Q.K(i+1) runs (FA2 order).
#include <cmath>

#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/tile_load.cuh"

namespace rm::kernels::cuda::detail {
namespace {

template <int D>
__global__ void __launch_bounds__(Traits<D>::kThreads) forward_kernel(const AttentionParams p) {
  using T = Traits<D>;
  constexpr int kC = T::kChunks;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = sQ + T::kRows * D;
  bf16* sV = sK + T::kKeys * D;
  int* sPos = reinterpret_cast<int*>(sV + T::kKeys * D);

  const int seg = blockIdx.x, head = blockIdx.y;
  const int kv = head / (p.heads_q / p.heads_kv);
  const int r0 = p.plan.seg_begin[seg], rows = p.plan.seg_count[seg];
  const std::int64_t list = list_of(p.plan, head, seg);
  const std::int64_t first = p.plan.item_offsets[list], last = p.plan.item_offsets[list + 1];
  const bf16* q = static_cast<const bf16*>(p.q) + (static_cast<std::size_t>(head) * p.rows_q + r0) * D;
  const bf16* k = static_cast<const bf16*>(p.k) + static_cast<std::size_t>(kv) * p.rows_k * D;
  const bf16* v = static_cast<const bf16*>(p.v) + static_cast<std::size_t>(kv) * p.rows_k * D;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Causal limit of this thread's two rows (g, g+8); kNoKey - 1 lets every real key through.
  int limit[2];
  for (int h = 0; h < 2; ++h) {
    const int row = warp * 16 + g + 8 * h;
    limit[h] = !p.causal ? kNoKey - 1 : (row < rows ? p.plan.q_pos[r0 + row] : -1);
  }

  auto issue_k = [&](std::int64_t i) {
    if (i < last) {
      const PlanItem item = load_item(p.plan, i);
      load_tile<D, T::kKeys, T::kThreads>(sK, k, item.count, [&](int r) { return item_row(p.plan, item, r); });
      load_key_meta<T::kKeys>(p.plan, item, sPos, nullptr);
    }
    cp_async_commit();  // empty groups keep the wait counts uniform
  };
  auto issue_v = [&](std::int64_t i) {
    if (i < last) {
      const PlanItem item = load_item(p.plan, i);
      load_tile<D, T::kKeys, T::kThreads>(sV, v, item.count, [&](int r) { return item_row(p.plan, item, r); });
    }
    cp_async_commit();
  };

  load_tile<D, T::kRows, T::kThreads>(sQ, q, rows, [](int r) { return r; });
  issue_k(first);  // group {Q, K0}
  issue_v(first);  // group {V0}

  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;

  for (std::int64_t i = first; i < last; ++i) {
    cp_async_wait<1>();
    __syncthreads();  // K(i) and its positions are visible
    float s[T::kKeys / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4(a, sQ + swizzle<kC>(warp * 16 + lane % 16, kk * 2 + lane / 16));
#pragma unroll
      for (int n2 = 0; n2 < T::kKeys / 16; ++n2) {
        std::uint32_t b[4];
        ldmatrix_x4(b, sK + swizzle<kC>(n2 * 16 + (lane / 16) * 8 + lane % 8, kk * 2 + (lane / 8) % 2));
        mma_bf16(s[2 * n2], a, b[0], b[1]);
        mma_bf16(s[2 * n2 + 1], a, b[2], b[3]);
      }
    }
    // Mask, then the online-softmax update in log2 units.
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < T::kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pos = sPos[n * 8 + 2 * t + (e & 1)];
        s[n][e] = pos <= limit[e / 2] ? s[n][e] * scale_log2 : -INFINITY;
        mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = quad_max(mx[h]);
      const float base = mx[h] == -INFINITY ? 0.f : mx[h];  // all masked so far: avoid inf - inf
      const float alpha = exp2f(m[h] - base);
      m[h] = mx[h];
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < T::kKeys / 8; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[n][e] = exp2f(s[n][e] - base);
          sum += s[n][e];
        }
      l[h] = l[h] * alpha + sum;  // per-thread partial; summed over the quad at the end
#pragma unroll
      for (int d = 0; d < D / 8; ++d) {
        o[d][2 * h] *= alpha;
        o[d][2 * h + 1] *= alpha;
      }
    }
    __syncthreads();  // every warp is done with sK and sPos
    issue_k(i + 1);
    cp_async_wait<1>();
    __syncthreads();  // V(i) is visible
#pragma unroll
    for (int kk = 0; kk < T::kKeys / 16; ++kk) {
      std::uint32_t a[4];
      accum_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int d2 = 0; d2 < D / 16; ++d2) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, sV + swizzle<kC>(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8, d2 * 2 + lane / 16));
        mma_bf16(o[2 * d2], a, b[0], b[1]);
        mma_bf16(o[2 * d2 + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with sV
    issue_v(i + 1);
  }
  cp_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = quad_sum(l[h]);
    const int row = warp * 16 + g + 8 * h;
    if (row >= rows) continue;
    const std::size_t at = static_cast<std::size_t>(head) * p.rows_q + r0 + row;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    float* out = p.out + at * D;
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
      *reinterpret_cast<float2*>(out + d * 8 + 2 * t) = make_float2(o[d][2 * h] * inv, o[d][2 * h + 1] * inv);
    if (t == 0) p.lse[at] = sum > 0.f ? m[h] * 0.6931471805599453f + logf(sum) : -INFINITY;
  }
}

template <int D>
void launch(const AttentionParams& p, cudaStream_t stream) {
  using T = Traits<D>;
  check(cudaFuncSetAttribute(forward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::kFwdSmem)),
        "forward smem attribute");
  forward_kernel<D><<<dim3(static_cast<unsigned>(p.plan.segments), static_cast<unsigned>(p.heads_q)), T::kThreads,
                      T::kFwdSmem, stream>>>(p);
  check(cudaGetLastError(), "forward launch");
}

}  // namespace

void launch_forward(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_dim == 64) launch<64>(p, stream);
  else launch<128>(p, stream);
}

}  // namespace rm::kernels::cuda::detail
