// What a piece of attention costs the kernel: computed tiles and the allowed
// (query, key) pairs inside them. Tiles are Bq query rows x Bk key columns,
// cut over a rank's local token order.
#pragma once

#include <cstdint>

namespace rm::sparsity {

struct BlockShape {
  int64_t bq = 128;  // query rows per tile
  int64_t bk = 64;   // key columns per tile
};

struct TileCost {
  int64_t blocks = 0;  // tiles holding at least one allowed pair
  int64_t nnz = 0;     // allowed pairs (all of them lie in computed tiles)
  TileCost& operator+=(const TileCost& o) {
    blocks += o.blocks;
    nnz += o.nnz;
    return *this;
  }
  bool operator==(const TileCost&) const = default;
};

}  // namespace rm::sparsity
