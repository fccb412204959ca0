#include "sim/sparsity/general_count.hpp"

#include <algorithm>

#include "sim/sparsity/pair_count.hpp"

namespace rm::sparsity {

std::vector<Tile> cut_tiles(const TokenSet& tokens, int64_t tile_tokens) {
  std::vector<Tile> tiles;
  int64_t room = 0;  // free positions in the current tile
  auto add = [&](int64_t lo, int64_t hi) {
    while (lo < hi) {
      if (room == 0) {
        tiles.push_back({{}, lo, lo});
        room = tile_tokens;
      }
      int64_t take = std::min(room, hi - lo);
      Tile& t = tiles.back();
      if (!t.ranges.empty() && t.ranges.back().hi == lo) t.ranges.back().hi += take;
      else t.ranges.push_back({lo, lo + take});
      t.first = std::min(t.first, lo);
      t.last = std::max(t.last, lo + take - 1);
      room -= take;
      lo += take;
    }
  };
  for (const auto& r : tokens.runs)
    for (int64_t c = 0; c < r.count; ++c) add(r.begin + c * r.stride, r.begin + c * r.stride + r.len);
  return tiles;
}

TileCost general_count(const HeadPattern& p, const std::vector<Tile>& q_tiles, const std::vector<Tile>& k_tiles) {
  TileCost cost;
  for (const auto& qt : q_tiles) {
    for (const auto& kt : k_tiles) {
      if (kt.first > qt.last) continue;  // every key after every query: causally empty
      int64_t n = 0;
      for (const auto& q : qt.ranges)
        for (const auto& k : kt.ranges) n += allowed_pairs(p, q, k);
      if (n > 0) cost += TileCost{1, n};
    }
  }
  return cost;
}

}  // namespace rm::sparsity
