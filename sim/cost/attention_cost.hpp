// The formulas that turn attention work into FLOPs and seconds, in one place.
// A kernel tile of Bq x Bk does QK^T and PV: 2 GEMMs of 2*Bq*Bk*d FLOPs each
// in the forward; the backward does 2.5x the forward's work (dQ, dK, dV, and
// the recomputed P), as FlashAttention-2 counts it.
#pragma once

#include <cstdint>

namespace rm::cost {

inline double attention_fwd_flops_per_block(int64_t bq, int64_t bk, int head_dim) {
  return 4.0 * double(bq) * double(bk) * double(head_dim);
}
inline double attention_fwd_flops_per_nnz(int head_dim) { return 4.0 * double(head_dim); }
inline constexpr double kAttentionBwdFlopsRatio = 2.5;

// FLOPs a tile kernel executes over `blocks` tiles, masked entries included.
inline double tile_kernel_flops(double blocks, int64_t bq, int64_t bk, int head_dim, bool backward) {
  return blocks * attention_fwd_flops_per_block(bq, bk, head_dim) * (backward ? kAttentionBwdFlopsRatio : 1.0);
}

// FLOPs of an attention op over `nnz` allowed pairs of each of `batch` sequences
// (seconds come from CostModel::attention_seconds).
inline double attention_flops(int64_t nnz, int head_dim, int batch, bool backward) {
  return double(nnz) * (attention_fwd_flops_per_nnz(head_dim) * batch * (backward ? kAttentionBwdFlopsRatio : 1.0));
}

// Bytes of one ring step's K and V for `tokens` tokens of `kv_heads` heads (bf16).
inline double kv_bytes(int64_t tokens, int kv_heads, int head_dim, int batch) {
  return 2.0 * 2.0 * double(tokens) * double(kv_heads) * double(head_dim) * double(batch);
}

}  // namespace rm::cost
