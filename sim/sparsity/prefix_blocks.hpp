// Whole-sequence tile counts of a synthetic vertical-slash head while its
// draws are searched (vs_generator's top-p calibration): the head is sinks +
// local diagonals + the first nv column draws + the first nd offset draws,
// and the search asks for many (nv, nd). Recounting each from scratch
// (chunk_row_costs) cost ~15 full counts per head, the largest share of a
// default step. Here the count is kept up to date as prefixes grow or
// shrink: a draw moving in or out touches only the (vertical, block
// diagonal) pairs it is part of, and a count reads one O(blocks) sweep.
//
// The rule is block_count.hpp's for ONE query set and ONE key set, both
// [0, n_tokens), with Bq = u (one segment per block) and Bk dividing u:
//   tiles = (u/Bk) · Σ_{d in D, d < nb} (nb − d)             selected blocks
//         + Σ_qb ceil(c(qb) / Bk)                             gathered verticals
//   c(qb) = #{vertical v : v/u < qb, qb − v/u not in D}
// with D the block diagonals (0 must be in D: every head with local
// diagonals). Exactly chunk_row_costs(...)[0].blocks: checked against it in
// tests/sim/sparsity_prefix_blocks_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/sparsity/tile_cost.hpp"

namespace rm::sparsity {

class PrefixBlocks {
 public:
  // Whether the closed rule above applies (else count the assembled head).
  static bool supported(int64_t n_tokens, int64_t unit, int64_t local_diagonals, BlockShape s);

  // vertical_draws: column positions >= sinks, distinct; offset_draws: slash
  // offsets >= local_diagonals, distinct; both in draw order.
  PrefixBlocks(int64_t n_tokens, int64_t unit, BlockShape s, int64_t sink_tokens, int64_t local_diagonals,
               const std::vector<int64_t>& vertical_draws, const std::vector<int64_t>& offset_draws);

  // Computed tiles with the first nv column draws and nd offset draws.
  int64_t blocks(size_t nv, size_t nd);
  // blocks(nv, nd) >= min_tiles, answered from bounds when they decide it:
  // selected-block tiles alone (a lower bound) and gathered tiles without the
  // verticals that selected blocks hide (an upper bound) cost O(1) per moved
  // draw; the exact pair count moves only when the bounds straddle min_tiles.
  bool reaches(size_t nv, size_t nd, int64_t min_tiles);

  // The upper bound reaches() uses (selected-block tiles plus gathered tiles
  // with no vertical hidden), by order statistics of the column blocks, and
  // the same by a sweep over every block (its oracle in tests).
  int64_t upper(size_t nv, size_t nd);
  int64_t upper_by_sweep(size_t nv, size_t nd);

  // (vertical, diagonal) pair updates done so far: what the exact count costs.
  int64_t pair_updates() const { return updates_; }
  // reaches() calls the bounds did not decide.
  int64_t exact_probes() const { return exact_; }

 private:
  void move_bounds(size_t nv, size_t nd);
  void move_pairs(size_t nv, size_t nd);
  void push_vertical(int64_t block);
  void pop_vertical();
  void push_offset(int64_t offset);
  void pop_offset();
  void cover(int64_t d, int sign);  // d entering (+1) or leaving (-1) the pairs' D
  int64_t gathered_upper() const;   // sum of ceil(P(qb) / Bk): no vertical hidden
  int64_t gathered_upper_sweep() const;
  void count_column(int64_t block, int32_t sign);  // hist_ and its Fenwick tree

  int64_t nb_ = 0, unit_ = 0, bk_ = 0, chunks_ = 0;
  std::vector<int64_t> vdraw_blocks_;  // block of each column draw (-1: past n_tokens)
  std::vector<int64_t> odraws_;
  // Bounds state, at prefixes (bnv_, bnd_): columns per block, offsets per diagonal.
  size_t bnv_ = 0, bnd_ = 0;
  std::vector<int32_t> hist_;
  // Fenwick tree over hist_ (1-based) and the columns in it: the k-th column
  // block in O(log blocks), so the upper bound costs O(columns / Bk · log)
  // per probe instead of a sweep over every block (~25% of the calibration).
  std::vector<int32_t> fen_;
  int64_t columns_ = 0, fen_top_ = 0;
  std::vector<int32_t> bcover_;  // per block diagonal < nb
  int64_t slash_tiles_ = 0;
  // Pair state, at prefixes (nv_, nd_): the (vertical, diagonal) coincidences.
  size_t nv_ = 0, nd_ = 0;
  std::vector<int64_t> verticals_;  // blocks of the included columns, in order (a stack)
  std::vector<int32_t> cover_;      // per block diagonal < nb: offsets selecting it
  std::vector<int32_t> diagonals_;  // covered diagonals 1 <= d < nb, in order covered (a stack)
  // corr[qb] = #{(v, d): v/u + d = qb, d in D, d >= 1}, over 2·nb entries:
  // pairs past the last block land in the padding instead of a branch per
  // pair (the calibration's innermost loop); the count reads [0, nb).
  std::vector<int32_t> corr_;
  int64_t updates_ = 0, exact_ = 0;
};

}  // namespace rm::sparsity
