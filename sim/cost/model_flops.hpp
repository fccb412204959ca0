// Model FLOPs: what the scoped work of an experiment costs by the MFU
// convention (PaLM appendix B, Megatron-LM) — matmuls and dense causal
// attention, forward + backward, no recomputation, no elementwise work, no
// sparsity. The numerator of the dense-equivalent MFU; the one place that
// formula lives.
//
// With T = dp * batch * seq_len tokens per step:
//   matmuls   — a weight multiplies every token once in the forward (2 FLOPs:
//               multiply, add) and twice in the backward (dX and dW): 6 FLOPs
//               per weight per token. Matmul weights of a decoder layer:
//               Q, K, V, O projections and the SwiGLU MLP (gate, up, down);
//               of the model: L layers plus the LM head (vocab x hidden). Norm
//               gains and the input embedding (a lookup) do no matmul work.
//   attention — per sequence, layer and query head, QK^T and PV over the
//               S(S+1)/2 pairs of the causal mask, 4*head_dim FLOPs per pair
//               (attention_cost.hpp). The backward does twice the forward
//               (dS, dQ, dK from QK^T's inputs; dP, dV from PV's): 3x forward
//               in all. FlashAttention's backward also recomputes QK^T (the
//               2.5x the schedules carry); by convention that is not counted.
// Scopes: `step` counts every layer and the LM head; `layer` one decoder
// layer; `attention_fwd_bwd` one layer's attention, forward and backward;
// `attention_fwd` its forward only.
#pragma once

#include <cstdint>

#include "sim/config/experiment.hpp"
#include "sim/cost/attention_cost.hpp"

namespace rm::cost {

struct ModelFlops {
  double dense = 0;      // matmul FLOPs of the scope (0 for the attention scopes)
  double attention = 0;  // dense causal attention FLOPs of the scope
  double total() const { return dense + attention; }
};

inline int64_t matmul_params_per_layer(const Model& m) {
  const int64_t q = int64_t(m.heads) * m.head_dim, kv = int64_t(m.kv_heads) * m.head_dim;
  return m.hidden * q + 2 * m.hidden * kv + q * m.hidden + 3 * m.hidden * m.intermediate;
}

// Forward FLOPs of one layer's dense causal attention over `sequences` sequences.
inline double causal_attention_fwd_flops(const Model& m, int64_t seq_len, double sequences) {
  const double pairs = double(seq_len) * double(seq_len + 1) / 2.0;
  return attention_fwd_flops_per_nnz(m.head_dim) * double(m.heads) * pairs * sequences;
}

inline ModelFlops model_flops(const Experiment& e) {
  const Model& m = e.model;
  const double sequences = double(e.parallel.dp) * e.workload.batch;
  const double tokens = sequences * double(e.workload.seq_len);
  const double attn_fwd = causal_attention_fwd_flops(m, e.workload.seq_len, sequences);
  const double layer_matmuls = 6.0 * double(matmul_params_per_layer(m)) * tokens;
  switch (e.scope) {
    case Scope::attention_fwd: return {0, attn_fwd};
    case Scope::attention_fwd_bwd: return {0, 3 * attn_fwd};
    case Scope::layer: return {layer_matmuls, 3 * attn_fwd};
    case Scope::step: break;
  }
  const double lm_head = 6.0 * double(m.vocab) * double(m.hidden) * tokens;
  return {m.layers * layer_matmuls + lm_head, m.layers * 3 * attn_fwd};
}

}  // namespace rm::cost
