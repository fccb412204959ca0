#pragma once
// The one interface of the attention kernels, shared by the CPU reference
// (kernels/cpu) and the CUDA kernels (kernels/cuda): a plain params struct in
// the FlashAttention style, filled and validated once by make_*_params.
//
// Layouts (row-major): q, out, dout, dq: [heads_q][rows_q][head_dim];
// k, v, dk, dv: [heads_kv][rows_k][head_dim]; lse: [heads_q][rows_q].
// Forward writes the tile's partial output and natural-log LSE per row
// (rows with no visible key: out = 0, lse = -inf), ready for merge_partial.
// Backward takes the FINAL (merged) out and lse with dout and adds this
// tile's share into dq, dk, dv (fp32), or overwrites them when
// accumulate is false.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/plan.hpp"

namespace rm::kernels {

enum class DType { f32, bf16 };  // element type of q, k, v, dout (outputs are fp32)

struct ConstTensor {
  const void* data = nullptr;
  std::size_t size = 0;  // elements
  DType dtype = DType::f32;
};

// The plan's arrays as the kernels read them (host or device pointers).
struct PlanView {
  const std::int32_t* q_pos = nullptr;
  const std::int32_t* k_pos = nullptr;
  const std::int32_t* seg_begin = nullptr;
  const std::int32_t* seg_count = nullptr;
  const std::int64_t* item_offsets = nullptr;
  const PlanItem* items = nullptr;
  const std::int32_t* gathered_rows = nullptr;
  int segments = 0;
  bool per_head = false;
  bool on_device = false;  // set by cuda::DevicePlan; each backend refuses the other's memory
};

struct AttentionParams {
  int heads_q = 0, heads_kv = 0, head_dim = 0, rows_q = 0, rows_k = 0;
  bool causal = true;
  float softmax_scale = 0;  // scores are softmax_scale * q.k
  DType dtype = DType::f32;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  float* out = nullptr;        // forward output
  float* lse = nullptr;        // forward output
  const void* dout = nullptr;  // backward inputs (dout has dtype; out, lse are the merged forward)
  const float* out_in = nullptr;
  const float* lse_in = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  bool accumulate = false;  // backward: add into dq, dk, dv
  PlanView plan;
};

PlanView view_of(const TilePlan& plan);

// softmax_scale 0 means 1/sqrt(head_dim). Throw std::invalid_argument on
// missing tensors, sizes that do not match the plan's shape, or mixed dtypes.
AttentionParams make_forward_params(const TilePlan& plan, ConstTensor q, ConstTensor k, ConstTensor v,
                                    std::span<float> out, std::span<float> lse, float softmax_scale = 0);
AttentionParams make_backward_params(const TilePlan& plan, ConstTensor q, ConstTensor k, ConstTensor v,
                                     ConstTensor dout, std::span<const float> out, std::span<const float> lse,
                                     std::span<float> dq, std::span<float> dk, std::span<float> dv,
                                     bool accumulate, float softmax_scale = 0);

inline ConstTensor tensor(std::span<const float> s) { return {s.data(), s.size(), DType::f32}; }
inline ConstTensor tensor(std::span<const std::uint16_t> s) { return {s.data(), s.size(), DType::bf16}; }

}  // namespace rm::kernels
