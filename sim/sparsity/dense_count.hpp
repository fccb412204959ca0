// Exact counts for the dense family — dense and document masks, causal or
// full — by per-run arithmetic, never per token, so any partition of a
// 1M-token sequence (stripes of one token included) counts in milliseconds.
// Same semantics as count.hpp: tiles cut over each set's local order, a tile
// is computed when it holds an allowed pair, nnz = allowed pairs.
//   nnz, causal: Σ over (query run, key run) of #{k <= q} (strided-run closed
//                forms), minus Σ_d |Q ∩ d| · |K ∩ [0, start_d)| with documents
//                (a query of document d sees keys in [start_d, q]);
//   nnz, full:   |Q| · |K|, or Σ_d |Q ∩ d| · |K ∩ d|;
//   tiles:       for each query tile and each document it meets, the key
//                tiles holding a key of that document (at or before the tile's
//                last query in it, when causal) are one interval of tile
//                indices per stretch of the key set whose local order is
//                increasing; a query tile computes the union of its intervals.
#pragma once

#include <vector>

#include "sim/sparsity/head_pattern.hpp"
#include "sim/sparsity/tile_cost.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::sparsity {

// p.dense_family() must hold; the functions mirror count.hpp's.
TileCost dense_count(const HeadPattern& p, const TokenSet& q, const TokenSet& k, BlockShape shape);
std::vector<TileCost> dense_pair_costs(const HeadPattern& p, const std::vector<TokenSet>& ranks, BlockShape shape);
std::vector<TileCost> dense_chunk_row_costs(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape shape);

}  // namespace rm::sparsity
