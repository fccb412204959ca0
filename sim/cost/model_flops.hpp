// Model FLOPs: what the scoped work of an experiment costs by the MFU
// convention (PaLM appendix B, Megatron-LM) — matmuls and the attention of the
// mask the model computes, forward + backward, no recomputation, no
// elementwise work. The numerator of MFU, and of the dense-causal reference
// the dense-equivalent speed-up compares with; the one place those formulas
// live. HFU's numerator (what the kernels execute) is executed_flops().
//
// With T = dp * batch * seq_len tokens per step:
//   matmuls   — a weight multiplies every token once in the forward (2 FLOPs:
//               multiply, add) and twice in the backward (dX and dW): 6 FLOPs
//               per weight per token. Matmul weights of a decoder layer:
//               Q, K, V, O projections and the SwiGLU MLP (gate, up, down);
//               of the model: L layers plus the LM head (vocab x hidden). Norm
//               gains and the input embedding (a lookup) do no matmul work.
//   attention — per sequence, layer and query head, QK^T and PV over the
//               non-zeros of the mask, 4*head_dim FLOPs per pair
//               (attention_cost.hpp): what the Schedule's forward attention
//               ops carry. The backward does twice the forward (dS, dQ, dK
//               from QK^T's inputs; dP, dV from PV's): 3x forward in all.
//               FlashAttention's backward also recomputes QK^T (the 2.5x the
//               schedules carry); by convention that is not counted. The dense
//               causal reference has S(S+1)/2 non-zeros per head and sequence.
// Scopes: `step` counts every layer and the LM head; `layer` one decoder
// layer; `attention_fwd_bwd` one layer's attention, forward and backward;
// `attention_fwd` its forward only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sim/config/experiment.hpp"
#include "sim/cost/attention_cost.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::cost {

struct ModelFlops {
  double dense = 0;      // matmul FLOPs of the scope (0 for the attention scopes)
  double attention = 0;  // attention FLOPs of the scope, fwd + bwd by the convention
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

// Model FLOPs of the scope whose forward attention, over all its layers, heads
// and sequences, is `attention_fwd_flops` (non-zeros x 4 x head_dim).
inline ModelFlops model_flops(const Experiment& e, double attention_fwd_flops) {
  const Model& m = e.model;
  const double tokens = double(e.parallel.dp) * e.workload.batch * double(e.workload.seq_len);
  const double layer_matmuls = 6.0 * double(matmul_params_per_layer(m)) * tokens;
  switch (e.scope) {
    case Scope::attention_fwd: return {0, attention_fwd_flops};
    case Scope::attention_fwd_bwd: return {0, 3 * attention_fwd_flops};
    case Scope::layer: return {layer_matmuls, 3 * attention_fwd_flops};
    case Scope::step: break;
  }
  const double lm_head = 6.0 * double(m.vocab) * double(m.hidden) * tokens;
  return {m.layers * layer_matmuls + lm_head, 3 * attention_fwd_flops};
}

// The same scope with dense causal attention in every layer: the reference of
// the dense-equivalent speed-up.
inline ModelFlops dense_causal_model_flops(const Experiment& e) {
  const int layers = e.scope == Scope::step ? e.model.layers : 1;
  const double sequences = double(e.parallel.dp) * e.workload.batch;
  return model_flops(e, layers * causal_attention_fwd_flops(e.model, e.workload.seq_len, sequences));
}

// Forward attention FLOPs of the mask a Schedule computes: its attention
// forward ops outside recomputation carry non-zeros x 4 x head_dim each.
inline double mask_attention_fwd_flops(const schedule::Schedule& s) {
  double f = 0;
  for (const auto& op : s.ops)
    if (op.kind == schedule::OpKind::attn_fwd && op.phase == schedule::Phase::forward) f += s.desc(op).flops;
  return f;
}

// FLOPs the kernel of a compute op executes: a tiled attention op computes
// every entry of the tiles it visits, masked or not (blocks x tile FLOPs);
// any other op its flops. The numerator of HFU, summed over every compute op
// (recomputation included).
inline double executed_flops(const schedule::Op& op, const schedule::OpDesc& d, int64_t bq, int64_t bk, int head_dim) {
  if (d.blocks > 0 && (op.kind == schedule::OpKind::attn_fwd || op.kind == schedule::OpKind::attn_bwd)) {
    return std::max(d.flops, tile_kernel_flops(double(d.blocks), bq, bk, head_dim,
                                               op.kind == schedule::OpKind::attn_bwd));
  }
  return d.flops;
}

}  // namespace rm::cost
