// The sizes the generators put on ops that are not attention tiles: GEMM and
// elementwise FLOPs of a decoder layer, and the bytes of every message the
// attention schedules move. Attention tile FLOPs and K/V message bytes come
// from sim/cost/attention_cost.hpp; everything here builds on those.
#pragma once

#include <cstdint>

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

// MTraining's online index building: the last 64 queries are scored; top-p
// keeps at most 4096 verticals and 4096 slashes per head (REFERENCE.md).
inline constexpr int64_t kIndexLastQueries = 64;
inline constexpr int64_t kIndexMaxVerticals = 4096;
inline constexpr int64_t kIndexMaxSlashes = 4096;

// Bytes of `tokens` tokens of `heads` heads (bf16, batch b): one of Q, O, dO, dQ.
inline int64_t head_bytes(int64_t tokens, int heads, int head_dim, int batch) {
  return tokens * heads * head_dim * batch * kBf16Bytes;
}
// One ring step's K and V.
inline int64_t kv_message_bytes(int64_t tokens, int kv_heads, int head_dim, int batch) {
  return int64_t(cost::kv_bytes(tokens, kv_heads, head_dim, batch));
}
// dK and dV travel as fp32 accumulators (LoongTrain, ring-flash-attention).
inline int64_t dkv_message_bytes(int64_t tokens, int kv_heads, int head_dim, int batch) {
  return kv_message_bytes(tokens, kv_heads, head_dim, batch) * kFp32Bytes / kBf16Bytes;
}

}  // namespace rm::generate
