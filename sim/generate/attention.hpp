// One layer's distributed attention, forward or backward, on every rank:
//   head all-to-all in the head group (hp > 1: sequence shards -> head shards; Ulysses, 2D)
//   the shuffle (parallel.shuffle = per_call; MTraining): per tensor an all-to-all in
//   the context group (stripe / balanced) or in zigzag pairs (zigzag)
//   online index building (dynamic patterns, every forward and recomputation; index_building.hpp)
//   the ring (ring_emitter.hpp), then the inverse shuffle and the inverse head all-to-all.
// Backward sends dO in and dQ/dK/dV out; when the layer's Q/K/V were recomputed
// in sequence layout (selective checkpoint) they are exchanged again too.
#pragma once

#include "sim/generate/step_context.hpp"

namespace rm::generate {

struct AttentionCall {
  schedule::Phase phase = schedule::Phase::forward;
  int layer = 0;
  bool backward = false;
  bool qkv_recomputed = false;  // backward only: Q/K/V come from a sequence-layout recomputation
};

// ready[r] in: what the attention waits for on rank r; out: what ends it there.
void emit_attention(StepContext& ctx, const AttentionCall& call, RankDeps& ready);

// The attention's own buffers on rank `rank` for the pass `phase` (buffer_ids.hpp).
AttentionTensors attention_tensors(StepContext& ctx, int rank, schedule::Phase phase);

// What the dense part of the layer writes before the attention and reads
// after it, per rank: the first exchange's input (or the attention's own
// buffers when nothing is exchanged). Forward in: Q, K|V; out: O.
// Backward in: dO (then Q, K|V under selective checkpointing); out: dQ, dK|dV.
// The Q and K|V the online index building scores (index_building.hpp): the
// attention's own or, when the layout is shuffled per call, their copies before
// the shuffle (MTraining's build_index runs on the contiguous layout, then
// shuffles Q, K and V: minfer_striped.py), where context rank cp - 1 holds the
// last queries.
struct IndexInputs {
  int q = -1, kv = -1;
  bool before_shuffle = false;
};
IndexInputs index_inputs(StepContext& ctx, int rank, schedule::Phase phase);

std::vector<int> attention_inputs(StepContext& ctx, int rank, schedule::Phase phase, bool backward);
std::vector<int> attention_outputs(StepContext& ctx, int rank, schedule::Phase phase, bool backward);

}  // namespace rm::generate
