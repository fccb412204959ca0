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

// Parameters one tensor-parallel rank holds (Megatron): 1/tp of every projection
// (QKV and gate+up by columns, O and down by rows; experiment.cpp checks tp divides heads,
// KV heads and the intermediate size), the norms whole; of the embedding and LM head a
// vocabulary shard of ceil(vocab/tp) rows (Megatron pads the vocabulary to a multiple
// of tp), the final norm whole. tp = 1: Model::layer_params() and the embedding's count.
inline int64_t tp_vocab(const Model& m, int tp) { return (m.vocab + tp - 1) / tp; }
inline int64_t tp_layer_params(const Model& m, int tp) {
  return (m.layer_params() - m.layer_norm_params()) / tp + m.layer_norm_params();
}
inline int64_t tp_embed_params(const Model& m, int tp) {
  return tp_vocab(m, tp) * m.hidden * (m.tied_embeddings ? 1 : 2) + m.hidden;
}

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

// Whether the attention kernel merges each ring step into the running O and LSE
// itself: MTraining's Triton `block_bar_attn_fwd` (pit_sparse_flash_attention_v3_triton.py)
// takes O and LSE, loads them in its epilogue and stores the merged pair; a
// FlashAttention kernel returns the step's partial for a separate update.
inline bool merges_in_kernel(const AttentionKernel& k) { return k.name == "block_sparse"; }

// The forward merge of one ring step over `tokens` queries x `heads`, as memory traffic.
// In the kernel (MTraining): the running O (bf16, q's dtype: `torch.zeros_like(q)`) and
// LSE (fp32) read and written, 2·(2D + 4) B per query and head. Separate (ring-flash-
// attention's `update_out_and_lse`, counted as one fused pass): the partial O (bf16) and
// LSE (fp32) read, the fp32 O and LSE read and written, (2D + 4) + 2·(4D + 4) B.
inline int64_t merge_fwd_bytes(int64_t tokens, int heads, int head_dim, int batch, bool in_kernel) {
  const int64_t per = in_kernel ? 2 * (head_dim * kBf16Bytes + kFp32Bytes)
                                : head_dim * kBf16Bytes + kFp32Bytes + 2 * (head_dim + 1) * kFp32Bytes;
  return tokens * heads * batch * per;
}
// The backward merge of one ring step (minfer_striped.py / minfer_dr_striped.py): `dq +=
// step_dq` (fp32 accumulator from `bar_attn_bwd`, bf16 partial from `block_attn_bwd`);
// for dK and dV the bf16 partial read and the sum written in `grad_comm_dtype`
// (`dk = step_dk.to(float32)` at an inner ring's first step) plus, when a sum came with
// the block (`dkv_sum`), that sum read (`dk = next_dk; dk += step_dk`).
inline int64_t merge_bwd_bytes(int64_t tokens, int heads, int kv_heads, int head_dim, int batch, bool dkv_sum,
                               GradDtype d) {
  const int64_t dq = tokens * heads * head_dim * batch * (2 * kFp32Bytes + kBf16Bytes);
  const int64_t g = dkv_message_bytes(tokens, kv_heads, head_dim, batch, d);
  return dq + kv_message_bytes(tokens, kv_heads, head_dim, batch) + g + (dkv_sum ? g : 0);
}
// A two-level ring's outer dK/dV addition after every round but the first
// (minfer_dr_striped.py, `minfer_dr_stripe_backward_outer`: `dk = next_dk; dk += step_dk`,
// both sums in `grad_comm_dtype`): two sums read, one written.
inline int64_t outer_dkv_add_bytes(int64_t tokens, int kv_heads, int head_dim, int batch, GradDtype d) {
  return 3 * dkv_message_bytes(tokens, kv_heads, head_dim, batch, d);
}

// `convert_blockmask_col_reverse` (block_sparse_attn_interface.py), the backward's
// conversion of the [.., nb, nb] slash block mask into per-column block lists, per
// element: the cast to uint8 (1 + 1), the stable sort's values (1) and int64 indices
// (8) written, the masked fill (values read 1, indices written 8), the flip (8 + 8),
// transpose + contiguous (8 + 8), int64 -> int32 (8 + 4).
inline constexpr int64_t kColReverseBytesPerElement = 64;

}  // namespace rm::generate
