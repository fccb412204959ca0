// MTraining's online sparse-index building, as its code runs it
// (minference/ops/op_utils/vertical_slash_utils.py: calc_index, convert_indices,
// convert_blockmask): per layer, in every forward and every recomputation that
// runs the attention, all of a head rank's heads at once, in every context group:
//   broadcast of the last 64 queries from the rank that owns them;
//   scores of those queries against the local keys;
//   top-p only: all-gather of the row maxima, exp and row sums, all-gather of the sums;
//   column sums (verticals) -> gather to context rank 0 -> top-k there -> broadcast;
//   diagonal sums (slashes)  -> gather to context rank 0 -> top-k there -> broadcast;
//   per rank: the index conversion (block mask of the slashes, vertical lists
//   per query block) and the block-mask sort, whose work grows with
//   (local tokens / 128)^2 x heads x ranks.
// The backward converts the block mask once more (emit_backward_index_conversion).
// docs/generators.md ("Index building") says where every size comes from.
#pragma once

#include <cstdint>

#include "sim/generate/step_context.hpp"

namespace rm::generate {

// The sizes the index building works with, for one head rank's share.
struct IndexSizes {
  bool top_p = false;      // top-p selection (two all-gathers for a global softmax); else static top-k budgets
  int64_t verticals = 0;   // selected verticals per head, padded to whole 128-token blocks
  int64_t slashes = 0;     // selected slashes per head, likewise
  int64_t blocks = 0;      // local query blocks of 128 tokens (= key blocks per ring step)
};
IndexSizes index_sizes(const Experiment& e);

// An executable Schedule builds each index on the contiguous layout before the
// per-call shuffle, as MTraining does. The zigzag shuffle swaps halves within the
// pairs (c, cp-1-c) (MTraining's shuffle_zigzag_input): from contiguous shards it
// hands rank c < cp/2 chunks 2c and 2cp-1-2c (MTraining's own pairing), not the
// zigzag partition's chunks c and 2cp-1-c; the two agree only at cp = 2. With a
// dynamic pattern, a per-call zigzag shuffle and cp > 2, no contiguous layout
// precedes the shuffle, so no runtime can build that index: throws ConfigError
// naming $.parallel.partition. The commands that write a Schedule for the
// runtime (`schedule`, `plan --export`) run it; the costs do not depend on the
// layout, so simulations of the experiment and their predictions stand.
void check_index_layout(const Experiment& e);

// The index building of one context group (d, h) for `layer` in `phase`
// (forward or recompute); ready[r] in/out as everywhere.
void emit_index_building(StepContext& ctx, int d, int h, int t, schedule::Phase phase, int layer, RankDeps& ready);

// The backward's conversion of the built slash block mask into per-column block lists
// (`convert_blockmask_col_reverse`: once over the whole [cp, B, H, nb, nb] mask in
// minfer_striped.py's `minfer_stripe_backward`; minfer_dr_striped.py converts each
// step's share inside `block_attn_bwd`, the same bytes in cp launches): one
// index_build op per rank of context group (d, h), before the ring backward.
void emit_backward_index_conversion(StepContext& ctx, int d, int h, int t, schedule::Phase phase, int layer,
                                    RankDeps& ready);

// p2p tag of the gathers to context rank 0.
inline constexpr int64_t kTagIndexGather = 5;

}  // namespace rm::generate
