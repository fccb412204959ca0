// The exact counting path that works for every pattern and every token set:
// tiles are cut over the local order, each tile is a short list of global
// ranges, and each (query tile, key tile) is counted by interval arithmetic.
// Its cost grows with the number of tile pairs, so the aligned path
// (aligned_count.hpp) takes over when tiles are global blocks.
#pragma once

#include <vector>

#include "sim/sparsity/head_pattern.hpp"
#include "sim/sparsity/tile_cost.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::sparsity {

struct Tile {
  std::vector<Interval> ranges;  // global token ranges, in local order
  int64_t first = 0;             // smallest token
  int64_t last = 0;              // largest token
};

// The tiles of `tokens` cut every `tile_tokens` local positions (last may be short).
std::vector<Tile> cut_tiles(const TokenSet& tokens, int64_t tile_tokens);

TileCost general_count(const HeadPattern& p, const std::vector<Tile>& q_tiles, const std::vector<Tile>& k_tiles);

}  // namespace rm::sparsity
