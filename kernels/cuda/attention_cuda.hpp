#pragma once
// CUDA attention kernels (bf16 tensor cores, sm_80+), same params and plan as
// the CPU reference: upload a TilePlan once with DevicePlan, fill params with
// device tensors (make_*_params), bind them to the device plan, launch.
// q, k, v, dout must be bf16 and 16-byte aligned; outputs are fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention.hpp"

namespace rm::kernels::cuda {

// True when a CUDA device can be used; any error (no driver, no device) is "no".
bool device_available();

// A TilePlan copied to GPU memory.
class DevicePlan {
 public:
  explicit DevicePlan(const TilePlan& plan, cudaStream_t stream = nullptr);
  ~DevicePlan();
  DevicePlan(const DevicePlan&) = delete;
  DevicePlan& operator=(const DevicePlan&) = delete;

  // params with their plan view pointing at this device plan; throws if the
  // params were not made for a plan of this shape.
  AttentionParams bind(AttentionParams params) const;

 private:
  TileShape shape_;
  bool causal_ = true;
  void* memory_ = nullptr;
  PlanView view_;
};

// Throw std::invalid_argument before any launch when params are unfit for
// the GPU (host plan, non-bf16 inputs, misaligned tensors); std::runtime_error
// on CUDA errors.
void attention_forward(const AttentionParams& params, cudaStream_t stream = nullptr);
void attention_backward(const AttentionParams& params, cudaStream_t stream = nullptr);

// acc <- merge(acc, part) on the device; rows = heads * rows_q.
void merge_partial(float* acc_out, float* acc_lse, const float* part_out, const float* part_lse, std::int64_t rows,
                   int head_dim, cudaStream_t stream = nullptr);

}  // namespace rm::kernels::cuda
