// One layer's distributed attention, forward or backward, on every rank:
//   head all-to-all in the head group (hp > 1: sequence shards -> head shards; Ulysses, 2D)
//   stripe shuffle all-to-all in the context group (stripe / balanced partitions; MTraining)
//   online index building (dynamic patterns, forward only; MTraining)
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

}  // namespace rm::generate
