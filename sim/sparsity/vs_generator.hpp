// Synthetic vertical-slash heads, MInference/MTraining style: always the
// sink columns [0, sinks) and the diagonals [0, local); then extra columns
// and diagonals drawn at random, either to a fixed budget (static top-k) or
// to reach a target block sparsity (the top-p profile: a denser head keeps
// more indices, up to the caps).
#pragma once

#include <vector>

#include "sim/sparsity/head_pattern.hpp"
#include "sim/sparsity/index_draws.hpp"

namespace rm::sparsity {

struct VsShape {
  int64_t seq_len = 0;
  int64_t sink_tokens = 30;
  int64_t local_diagonals = 100;
  Spread vertical_spread = Spread::uniform;
  Spread slash_spread = Spread::log_uniform;
};

// Exactly `verticals` columns and `slashes` diagonals (sinks and local ones
// included), fewer only when the sequence is too short to hold them.
HeadPattern budget_head(Rng& rng, const VsShape& shape, int64_t verticals, int64_t slashes);

// The smallest prefix of the random draws whose block density (computed /
// causal blocks at 128x64 over the sequence) reaches target_density;
// vertical_share of the extra indices are columns. Caps include sinks and local.
HeadPattern density_head(Rng& rng, const VsShape& shape, double target_density, double vertical_share,
                         int64_t max_verticals, int64_t max_slashes);
// The same head by the plain path (bisection, each probe counted from scratch
// by chunk_row_costs): the oracle the fast path is tested against.
HeadPattern density_head_reference(Rng& rng, const VsShape& shape, double target_density, double vertical_share,
                                   int64_t max_verticals, int64_t max_slashes);


// Per-layer sparsity with the given min, max and mean: a power curve between
// min and max, in a seeded order over the layers.
std::vector<double> layer_sparsity_profile(int layers, double min, double max, double mean, uint64_t seed);

}  // namespace rm::sparsity
