// Ring merge on the device: one warp per row, weights from merge_weights.
#include "kernels/cuda/launch.hpp"
#include "kernels/softmax_merge.hpp"

namespace rm::kernels::cuda::detail {
namespace {

__global__ void merge_kernel(float* acc_out, float* acc_lse, const float* part_out, const float* part_lse,
                             std::int64_t rows, int head_dim) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const MergeWeights w = merge_weights(acc_lse[row], part_lse[row]);
  float* o = acc_out + row * head_dim;
  const float* po = part_out + row * head_dim;
  for (int d = lane; d < head_dim; d += 32) o[d] = w.a * o[d] + w.b * po[d];
  __syncwarp();
  if (lane == 0) acc_lse[row] = w.lse;  // after every lane has read the old value
}

}  // namespace

void launch_merge(float* acc_out, float* acc_lse, const float* part_out, const float* part_lse, std::int64_t rows,
                  int head_dim, cudaStream_t stream) {
  constexpr int kWarps = 8;
  const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  if (blocks == 0) return;
  merge_kernel<<<blocks, kWarps * 32, 0, stream>>>(acc_out, acc_lse, part_out, part_lse, rows, head_dim);
  check(cudaGetLastError(), "merge launch");
}

}  // namespace rm::kernels::cuda::detail
