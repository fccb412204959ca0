// The fast exact path, for token-unit vertical-slash patterns (dense, sliding
// window, A-shape, vertical-slash) when every tile is a global aligned block
// and Bq is a multiple of Bk. Computed blocks of query block i are
//   VB(i) ∪ SB(i):  VB(i) = key blocks holding a vertical, j < (i+1)·Bq/Bk;
//                   SB(i) = i·Bq/Bk - R, one relative block set R per head,
// and non-zeros are slash pairs + vertical pairs - (vertical and slash) pairs.
// Counts per (query owner, key owner) come from one sweep over query blocks;
// the key owners hit by SB(i) are read from residue histograms when the
// ownership is periodic (stripe) or from owner segments otherwise — or, when
// few distinct frames make up the ownership (balanced), per frame pair
// (frame_sweep.hpp), whichever is estimated cheapest.
#pragma once

#include <vector>

#include "sim/sparsity/block_owners.hpp"
#include "sim/sparsity/frame_sweep.hpp"
#include "sim/sparsity/head_pattern.hpp"
#include "sim/sparsity/tile_cost.hpp"

namespace rm::sparsity {

bool aligned_supported(const HeadPattern& p, BlockShape s);

// Who holds each query block and key block, with the key side's period,
// segments and frames precomputed (a partition is counted against every head).
struct AlignedLayout {
  BlockOwners q;                       // per Bq block
  BlockOwners k;                       // per Bk block, k.owner.size() == q.owner.size() * Bq/Bk
  int64_t k_period = 0;                // owner_period(k.owner)
  std::vector<OwnerSegment> k_segments;  // owner_segments(k.owner)
  Frames frames;                       // choose_frames, when cheaper than a per-row sweep
};
AlignedLayout aligned_layout(BlockOwners q, BlockOwners k, BlockShape s);  // pads both to one token range

// For every query block i and relative key block j' = offset[e] (key block
// i·r - j' >= 0; offsets sorted, >= -(r-1)), adds TileCost{1, pairs[e]} to
// out[q owner * k.owners + k owner]: the owner-split sweep both the token-unit
// path and the block-unit path (block_count.hpp) count with.
void add_relative_blocks(const AlignedLayout& layout, int64_t r, const std::vector<int64_t>& offset,
                         const std::vector<int64_t>& pairs, std::vector<TileCost>& out);

// Returns q.owners x k.owners costs.
std::vector<TileCost> aligned_costs(const HeadPattern& p, const AlignedLayout& layout, BlockShape s);

// chunk_row_costs without an owner split, when Bq divides both seq_len and
// chunk_tokens (and aligned_supported): a chunk is whole query blocks, and
// against ALL keys query block i costs |VB(i)| + |SB(i)| - |VB(i) ∩ SB(i)|
// blocks — a column prefix, a prefix of R, and the pairs (column block j,
// j' in R) with j + j' = i·r — so one sweep gives every chunk. Non-zeros:
// slash pairs (prefix of R's pairs) + column pairs - (column and slash) pairs,
// the last bucketed per chunk from the start and end of each run of queries
// v + [d.lo, d.hi) per vertical token v and offset interval.
bool aligned_chunk_rows_supported(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape s);
std::vector<TileCost> aligned_chunk_row_costs(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape s);

// Computed blocks of the whole causal sequence [0, n_tokens), n_tokens a multiple of Bq.
int64_t aligned_total_blocks(const HeadPattern& p, int64_t n_tokens, BlockShape s);

}  // namespace rm::sparsity
