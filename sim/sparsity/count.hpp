// The workload model's questions: how many kernel tiles must be computed, and
// how many allowed pairs they hold, for a set of query tokens against a set
// of key tokens — exactly, never materialising S x S. Tiles are cut over each
// rank's LOCAL order (the concatenation of its runs). Dense and document
// masks (causal or full) take closed forms (dense_count.hpp). Vertical-slash
// and block-sparse heads are counted as the sparse kernel executes them
// (block_count.hpp); on token-unit patterns aligned inputs take the fast path
// (aligned_count.hpp), anything else the general one (general_count.hpp).
// All are exact.
#pragma once

#include <vector>

#include "sim/sparsity/head_pattern.hpp"
#include "sim/sparsity/tile_cost.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::sparsity {

TileCost count(const HeadPattern& p, const TokenSet& q, const TokenSet& k, BlockShape shape);

// out[qr * W + kr] = count(p, ranks[qr], ranks[kr], shape), W = ranks.size().
std::vector<TileCost> pair_costs(const HeadPattern& p, const std::vector<TokenSet>& ranks, BlockShape shape);

// Query chunk c = [c*chunk_tokens, min(S, (c+1)*chunk_tokens)) against keys [0, S).
std::vector<TileCost> chunk_row_costs(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape shape);

}  // namespace rm::sparsity
