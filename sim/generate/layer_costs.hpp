// The sizes the generators put on ops that are not attention tiles: GEMM and
// elementwise FLOPs of a decoder layer, and the bytes of every message the
// attention schedules move. Attention tile FLOPs and K/V message bytes come
// from sim/cost/attention_cost.hpp; everything here builds on those.
#pragma once

#include <cstdint>

#include "sim/config/experiment.hpp"
#include "sim/config/model.hpp"
#include "sim/cost/attention_cost.hpp"

namespace rm::generate {

inline constexpr int64_t kBf16Bytes = 2;
inline constexpr int64_t kFp32Bytes = 4;
// A GEMM's backward computes dX and dW: twice the forward's 2*m*n*k.
inline constexpr double kGemmBwdFlopsRatio = 2.0;

inline double gemm_flops(int64_t m, int64_t n, int64_t k) { return 2.0 * double(m) * double(n) * double(k); }

// FLOPs of the elementwise work counted per element: RMSNorm (square, sum,
// scale, weight) and SwiGLU (silu + product), AdamW (about 10 per parameter).
inline constexpr double kNormFlopsPerElement = 4.0;
inline constexpr double kSwigluFlopsPerElement = 5.0;
inline constexpr double kAdamFlopsPerParam = 10.0;

// MTraining's online index building (docs/generators.md, "Index building"):
// the last 64 queries are scored against every key; top-p keeps at most 4096
// verticals and 4096 slashes per head (REFERENCE.md) unless the pattern says
// otherwise; index buffers are padded to whole 128-token blocks.
inline constexpr int64_t kIndexLastQueries = 64;
inline constexpr int64_t kIndexMaxVerticals = 4096;
inline constexpr int64_t kIndexMaxSlashes = 4096;
inline constexpr int64_t kIndexGranularity = 128;
// torch.topk over many elements is a radix select: one pass over its input per
// 8-bit digit of the key (2 for bf16 scores), then a sort of the k picks.
inline constexpr int64_t kTopkPasses = 2;
// convert_blockmask, per element of the block mask tiled to 64-key columns:
// the tile written and read (uint8, 1 + 1), the stable sort's indices (int64, 8)
// and values (1) written, the indices read and written as int32 (8 + 4).
inline constexpr int64_t kBlockSortBytesPerElement = 23;

// Bytes of `tokens` tokens of `heads` heads (bf16, batch b): one of Q, O, dO, dQ.
inline int64_t head_bytes(int64_t tokens, int heads, int head_dim, int batch) {
  return tokens * heads * head_dim * batch * kBf16Bytes;
}
// One ring step's K and V.
inline int64_t kv_message_bytes(int64_t tokens, int kv_heads, int head_dim, int batch) {
  return int64_t(cost::kv_bytes(tokens, kv_heads, head_dim, batch));
}
// Bytes of one element of dK/dV on the wire and in their ring accumulators
// (`parallel.grad_comm_dtype`: fp32 in MTraining's hierarchical ring and
// LoongTrain, bf16 in MTraining's flat Triton ring).
inline int64_t grad_bytes(GradDtype d) { return d == GradDtype::fp32 ? kFp32Bytes : kBf16Bytes; }
// One ring step's dK and dV.
inline int64_t dkv_message_bytes(int64_t tokens, int kv_heads, int head_dim, int batch, GradDtype d) {
  return kv_message_bytes(tokens, kv_heads, head_dim, batch) * grad_bytes(d) / kBf16Bytes;
}

// The per-step merge of a ring step's partial result into the rank's
// accumulators, as memory traffic: every accumulator is read once and written
// once (online-softmax rescale; the step's partial itself is the kernel's
// output, in registers when fused as in MTraining's Triton kernel).
// Forward: O (fp32) and LSE (fp32) of `tokens` queries x `heads`.
inline int64_t merge_fwd_bytes(int64_t tokens, int heads, int head_dim, int batch) {
  return 2 * tokens * heads * (head_dim + 1) * batch * kFp32Bytes;
}
// Backward: dQ (fp32) and, when a dK/dV sum came with the block, that sum
// (`grad_comm_dtype`, `kv_heads` heads).
inline int64_t merge_bwd_bytes(int64_t tokens, int heads, int kv_heads, int head_dim, int batch, bool dkv_sum,
                               GradDtype d) {
  const int64_t dq = tokens * heads * head_dim * batch * kFp32Bytes;
  const int64_t dkv = dkv_sum ? dkv_message_bytes(tokens, kv_heads, head_dim, batch, d) : 0;
  return 2 * (dq + dkv);
}

}  // namespace rm::generate
