// Block-unit patterns (vertical-slash, block-sparse) counted as the sparse
// kernel executes them (kernels/plan.hpp; MTraining's pit_sparse kernel, see
// docs/sparsity.md). With u = slash_unit():
//  - query rows are cut into segments of <= Bq consecutive local rows, key
//    rows into chunks of <= Bk, neither straddling a u-block;
//  - a (segment, chunk) is one tile when its block pair is selected (block
//    diagonal qb - kb in slashes(), or for block-sparse kb a column block) and
//    the chunk's first key is not after the segment's last query;
//  - vertical-slash: the key set's verticals outside selected blocks and not
//    after the segment's last query are gathered, ceil(count / Bk) tiles;
//  - nnz: the pairs HeadPattern::allowed accepts.
// Exact for every token set. Fast when every set's local order is increasing
// (every partition's is): blocks with the same occupancy form a class, block
// pairs are counted per class pair (add_relative_blocks), so stripes of any
// width cost about what aligned ones do.
#pragma once

#include <vector>

#include "sim/sparsity/head_pattern.hpp"
#include "sim/sparsity/tile_cost.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::sparsity {

bool block_unit(const HeadPattern& p);  // counted here rather than by tiles of the local order

// How the fast path sums the gathered verticals of one key set over the query
// blocks: `dense` walks every query block after its first vertical (W x blocks
// per head); `events` visits only the blocks where the gathered count changes
// and spreads each change over the query classes by their period (query
// classes must repeat with a period: stripes); `automatic` takes the cheaper
// per key set; `few_verticals`, for a key set of at most Bk verticals (each query
// block then gathers one tile or none), counts per period position from the
// diagonal intervals without visiting blocks (others as `automatic`).
// Every choice gives the same counts (tests compare them).
enum class GatherSweep { automatic, dense, events, few_verticals };

// out[a * k.size() + b]: q[a] against k[b].
std::vector<TileCost> block_costs(const HeadPattern& p, const std::vector<TokenSet>& q, const std::vector<TokenSet>& k,
                                  BlockShape s, GatherSweep sweep = GatherSweep::automatic);

// The same by enumerating every (segment, chunk): any local order, cost ∝ their number (tests, odd inputs).
std::vector<TileCost> block_costs_general(const HeadPattern& p, const std::vector<TokenSet>& q,
                                          const std::vector<TokenSet>& k, BlockShape s);

}  // namespace rm::sparsity
