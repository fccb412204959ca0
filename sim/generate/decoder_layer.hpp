// The dense parts of a decoder layer around its attention, per rank on its
// local tokens: RMSNorm, QKV projection, [attention], output projection,
// RMSNorm, SwiGLU MLP (gate+up, activation, down); and their backward in
// reverse order (GEMM backward = dX + dW). A recomputation (checkpointing)
// replays the forward with phase `recompute`, with or without the attention.
// With tensor parallelism (Megatron, with sequence parallelism; docs/generators.md,
// "Tensor parallelism") each GEMM holds 1/tp of the columns (QKV, gate+up) or rows
// (O, down), the norms run on 1/tp of the tokens, and the tensor group all-gathers
// before and reduce-scatters after the attention and MLP blocks (backward: the mirror,
// plus Megatron's re-gather of each column-parallel GEMM's input).
#pragma once

#include <functional>
#include <utility>
#include <vector>

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

// One collective of `kind` in every tensor group (tp > 1), on stream `tp`; io(rank)
// gives its reads and writes. `bytes`: the all-gather's output, the reduce-scatter's input.
void tensor_collective(StepContext& ctx, schedule::OpKind kind, schedule::Where where, int64_t bytes, RankDeps& ready,
                       const std::function<std::pair<std::vector<int>, std::vector<int>>(int rank)>& io);
// Bytes of one tensor-parallel all-gather or reduce-scatter of the hidden states: all
// local tokens x hidden, bf16 (Megatron-SP: b*s/(cp*hp)*h*2).
int64_t tensor_collective_bytes(const StepContext& ctx);

// The dense part's buffers on rank `rank` (buffer_ids.hpp).
LayerBuffers layer_buffers(StepContext& ctx, int rank);
// The residual stream entering decoder layer `layer` (x{layers} leaves the last one):
// one buffer per layer, since layer l writes what layer l + 1 reads.
int layer_input(StepContext& ctx, int rank, int layer);

}  // namespace rm::generate
