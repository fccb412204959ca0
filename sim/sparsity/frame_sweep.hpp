// add_relative_blocks (aligned_count.hpp) by frames, for ownerships made of a
// few distinct frames with no overall period — the balanced partition, whose
// periods of W chunks are dealt forward or backward, is two frames per side.
// Query blocks are cut into frames of p blocks, key blocks into frames of p·r
// (r = Bq/Bk). Query block f·p + a against key block (f − D)·p·r + b is at
// relative offset j' = D·p·r + (a·r − b), so its owners depend only on the two
// frames' types, a and b, and which offsets are counted only on D:
//   out[q owner, k owner] += Σ over type pairs Σ_{a,b} G(a·r − b),
//   G(e) = Σ_D N(D) · [D·p·r + e ∈ offsets] · (1 block, its pairs),
// N(D) = frame pairs of those types D frames apart. Each offset has at most
// two (D, e) splits, so a call costs types² · (p²·r + 2·|offsets|), against
// O(query blocks · |offsets| / segment length) for the segment walk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/sparsity/tile_cost.hpp"

namespace rm::sparsity {

struct Frames {
  int64_t p = 0;  // query blocks per frame; 0: no frames
  int64_t r = 1;  // key blocks per query block
  int64_t frames = 0;  // per side; the owner sequences are padded with -1 to frames·p and frames·p·r
  std::vector<std::vector<int>> q_types, k_types;  // the owners of each distinct frame
  // [(tq · k_types.size() + tk) · frames + D]: query frames f of type tq whose key frame f − D has type tk.
  std::vector<int64_t> distance;
};

// Exact frames of p query blocks (any p >= 1): q_owner per query block, k_owner per key block,
// k_owner.size() <= q_owner.size() * r.
Frames make_frames(const std::vector<int>& q_owner, const std::vector<int>& k_owner, int64_t r, int64_t p);

// make_frames for the p whose add_frame_blocks call is estimated cheapest
// (distinct frames counted by rolling hashes, O(n log n) over all p), or p = 0
// when even that costs `limit` or more.
Frames choose_frames(const std::vector<int>& q_owner, const std::vector<int>& k_owner, int64_t r, double limit);

// Estimated work of one add_frame_blocks call with `offsets` offsets.
double frame_sweep_cost(const Frames& f, size_t offsets);

// What add_relative_blocks adds, for offsets sorted, >= -(r - 1), with their pairs:
// out[q owner * k_owners + k owner].
void add_frame_blocks(const Frames& f, const std::vector<int64_t>& offset, const std::vector<int64_t>& pairs,
                      int k_owners, std::vector<TileCost>& out);

}  // namespace rm::sparsity
