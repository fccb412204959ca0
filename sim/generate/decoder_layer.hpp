// The dense parts of a decoder layer around its attention, per rank on its
// local tokens: RMSNorm, QKV projection, [attention], output projection,
// RMSNorm, SwiGLU MLP (gate+up, activation, down); and their backward in
// reverse order (GEMM backward = dX + dW). A recomputation (checkpointing)
// replays the forward with phase `recompute`, with or without the attention.
#pragma once

#include "sim/generate/step_context.hpp"

namespace rm::generate {

struct LayerForward {
  schedule::Phase phase = schedule::Phase::forward;  // forward or recompute
  int layer = 0;
  bool with_attention = true;  // selective checkpoint++ recomputes without it
};
void emit_layer_forward(StepContext& ctx, const LayerForward& f, RankDeps& ready);

// qkv_recomputed: Q/K/V come from a recomputation that skipped the attention.
void emit_layer_backward(StepContext& ctx, int layer, bool qkv_recomputed, RankDeps& ready);

// The dense part's buffers on rank `rank` (buffer_ids.hpp).
LayerBuffers layer_buffers(StepContext& ctx, int rank);
// The residual stream entering decoder layer `layer` (x{layers} leaves the last one):
// one buffer per layer, since layer l writes what layer l + 1 reads.
int layer_input(StepContext& ctx, int rank, int layer);

}  // namespace rm::generate
