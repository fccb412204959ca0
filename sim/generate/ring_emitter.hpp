// Turns every context group's RingLayout into ops: one attention compute per
// ring step, costed from the pair costs of the rank's queries against the K/V
// it holds at that step, and the K/V transfers that feed the next step.
//
// Forward, per outer round so (O rounds of I inner steps, k = so*I + si):
//   post the outer K/V transfer (kv_outer stream)          -- O > 1, not last round
//   for each inner step: post the inner K/V transfer (kv_inner), then compute
//   the next round's first compute waits on the outer recv ("awaited after")
// Each transfer is a send to the next rank and a recv from the previous one,
// launched together; it waits for the compute that last read the buffer it
// overwrites (double buffering), and a compute waits for the recv that
// brought its K/V.
// Backward has the same shape with attn_bwd computes, plus dK/dV
// accumulators travelling with their block on their own streams: after each
// compute an inner dK/dV transfer (the I-th brings the round's block back to
// where it entered the node), after each round an outer one; the last one
// delivers every rank's own dK/dV.
// After every compute but the first, an elementwise merge op carries the
// memory traffic of merging the step into the accumulators (O, LSE; backward dQ
// and the step's dK/dV with the sum that came with the block; layer_costs.hpp).
// A two-level backward adds, after every round but the first, the round's dK/dV
// sum to the one from earlier nodes on the compute stream before the outer send.
// Every op names its buffers (docs/generators.md, "Buffers"): a compute reads
// Q and the K/V slot of its step, a send the slot the step computes on, a
// recv the slot the next step reads; each attention op says its query and key
// tokens, heads, mask, index and whether it merges into O/LSE (dQ).
#pragma once

#include "sim/generate/step_context.hpp"

namespace rm::generate {

// ready[r] in: what the attention waits for on rank r; out: what ends it there.
void emit_ring(StepContext& ctx, schedule::Phase phase, int layer, bool backward, RankDeps& ready);

// Tags of the ring's transfers (p2p tags tell concurrent transfers apart).
inline constexpr int64_t kTagKvInner = 1, kTagKvOuter = 2, kTagDkvInner = 3, kTagDkvOuter = 4;

}  // namespace rm::generate
