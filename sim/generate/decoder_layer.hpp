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

// The dense part's buffers on a rank (local tokens x features, bf16). Kept per
// layer: the activations the backward reads, the weights and their gradients.
// dx, the gradient of the residual stream, runs from layer to layer.
struct LayerBuffers {
  int xn1 = -1, h = -1, hn = -1, gu = -1, act = -1, weights = -1;
  int dx = -1, dact = -1, dgu = -1, dhn = -1, dh = -1, dxn1 = -1, wgrad = -1;
};
LayerBuffers layer_buffers(StepContext& ctx, int rank);
// The residual stream entering decoder layer `layer` (x{layers} leaves the last one):
// one buffer per layer, since layer l writes what layer l + 1 reads.
int layer_input(StepContext& ctx, int rank, int layer);

}  // namespace rm::generate
