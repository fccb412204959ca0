#pragma once
// Online-softmax pieces shared by the CPU and CUDA kernels: combining two
// partial results (O_a, lse_a), (O_b, lse_b) computed over disjoint key sets
// into the result over their union, exactly: lse = log(e^lse_a + e^lse_b),
// O = e^(lse_a-lse) O_a + e^(lse_b-lse) O_b. An empty part has lse = -inf.
#include <cmath>
#include <cstddef>
#include <span>

#if defined(__CUDACC__)
#define RINGMASTER_HD __host__ __device__ __forceinline__
#else
#define RINGMASTER_HD inline
#endif

namespace rm::kernels {

struct MergeWeights {
  float a, b, lse;
};

RINGMASTER_HD MergeWeights merge_weights(float lse_a, float lse_b) {
  const float m = lse_a > lse_b ? lse_a : lse_b;
  if (m == -INFINITY) return {0.f, 0.f, -INFINITY};  // both parts empty
  const float ea = expf(lse_a - m), eb = expf(lse_b - m);
  const float sum = ea + eb;
  return {ea / sum, eb / sum, m + logf(sum)};
}

// acc <- merge(acc, part), both [heads][rows][head_dim] with lse [heads][rows].
void merge_partial(std::span<float> acc_out, std::span<float> acc_lse, std::span<const float> part_out,
                   std::span<const float> part_lse, int head_dim);

}  // namespace rm::kernels
