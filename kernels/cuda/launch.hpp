#pragma once
// The dispatch layer between the public CUDA API (attention_cuda.cpp) and the
// kernels (one .cu file each, so they compile in parallel).
#include <cuda_runtime_api.h>

#include "kernels/attention.hpp"

namespace rm::kernels::cuda::detail {

// Throws std::runtime_error naming `what` when err is not cudaSuccess.
void check(cudaError_t err, const char* what);

void launch_forward(const AttentionParams& params, cudaStream_t stream);
void launch_backward(const AttentionParams& params, cudaStream_t stream);
void launch_merge(float* acc_out, float* acc_lse, const float* part_out, const float* part_lse, std::int64_t rows,
                  int head_dim, cudaStream_t stream);

}  // namespace rm::kernels::cuda::detail
