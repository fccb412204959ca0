#include "sim/sparsity/prefix_blocks.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace rm::sparsity {

bool PrefixBlocks::supported(int64_t n_tokens, int64_t unit, int64_t local_diagonals, BlockShape s) {
  return n_tokens > 0 && unit > 0 && s.bq == unit && s.bk > 0 && unit % s.bk == 0 && n_tokens % unit == 0 &&
         local_diagonals >= 1;
}

PrefixBlocks::PrefixBlocks(int64_t n_tokens, int64_t unit, BlockShape s, int64_t sink_tokens, int64_t local_diagonals,
                           const std::vector<int64_t>& vertical_draws, const std::vector<int64_t>& offset_draws)
    : nb_(n_tokens / unit), unit_(unit), bk_(s.bk), chunks_(unit / s.bk), odraws_(offset_draws) {
  if (!supported(n_tokens, unit, local_diagonals, s)) throw std::invalid_argument("PrefixBlocks: unsupported shape");
  const auto nb = static_cast<size_t>(nb_);
  hist_.assign(nb, 0);
  fen_.assign(nb + 1, 0);
  fen_top_ = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(nb_)));
  bcover_.assign(nb, 0);
  cover_.assign(nb, 0);
  corr_.assign(2 * nb, 0);
  vdraw_blocks_.reserve(vertical_draws.size());
  for (int64_t v : vertical_draws) vdraw_blocks_.push_back(v >= 0 && v < n_tokens ? v / unit : -1);
  // Local offsets [0, L) select block diagonals 0 .. ceil((L - 1) / u), for good.
  for (int64_t d = 0; d <= (local_diagonals - 1 + unit - 1) / unit && d < nb_; ++d) {
    ++bcover_[static_cast<size_t>(d)];
    slash_tiles_ += chunks_ * (nb_ - d);
    ++cover_[static_cast<size_t>(d)];
    cover(d, +1);
  }
  for (int64_t t = 0; t < std::min(sink_tokens, n_tokens); ++t) {
    count_column(t / unit, +1);
    push_vertical(t / unit);
  }
}

// ---- bounds: O(1) per draw ---------------------------------------------------

void PrefixBlocks::move_bounds(size_t nv, size_t nd) {
  for (; bnv_ < nv; ++bnv_)
    if (vdraw_blocks_[bnv_] >= 0) count_column(vdraw_blocks_[bnv_], +1);
  for (; bnv_ > nv; --bnv_)
    if (vdraw_blocks_[bnv_ - 1] >= 0) count_column(vdraw_blocks_[bnv_ - 1], -1);
  // An offset selects block diagonals floor(x/u) and ceil(x/u) (HeadPattern::vertical_slash).
  auto offset = [&](int64_t x, int sign) {
    for (int64_t d = x / unit_; d <= (x + unit_ - 1) / unit_ && d < nb_; ++d) {
      int32_t& c = bcover_[static_cast<size_t>(d)];
      if ((sign > 0 && c == 0) || (sign < 0 && c == 1)) slash_tiles_ += sign * chunks_ * (nb_ - d);
      c += sign;
    }
  };
  for (; bnd_ < nd; ++bnd_) offset(odraws_[bnd_], +1);
  for (; bnd_ > nd; --bnd_) offset(odraws_[bnd_ - 1], -1);
}

void PrefixBlocks::count_column(int64_t block, int32_t sign) {
  hist_[static_cast<size_t>(block)] += sign;
  columns_ += sign;
  for (auto i = static_cast<size_t>(block) + 1; i < fen_.size(); i += i & (~i + 1)) fen_[i] += sign;
}

// sum_qb ceil(seen(qb) / Bk) = sum_{k >= 0} #{qb : seen(qb) > k·Bk}, and
// seen(qb) > m exactly for qb > b_m, the m-th smallest column block (from 0):
// so the sum is over m = 0, Bk, 2·Bk, ... < columns of (blocks − 1 − b_m).
int64_t PrefixBlocks::gathered_upper() const {
  const int64_t queries = (columns_ + bk_ - 1) / bk_;
  if (queries * static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(nb_))) > nb_) return gathered_upper_sweep();
  int64_t tiles = 0;
  for (int64_t m = 0; m < columns_; m += bk_) {
    int64_t pos = 0, rem = m + 1;  // the smallest block whose prefix count reaches m + 1
    for (int64_t step = fen_top_; step > 0; step >>= 1)
      if (pos + step <= nb_ && fen_[static_cast<size_t>(pos + step)] < rem) {
        pos += step;
        rem -= fen_[static_cast<size_t>(pos)];
      }
    tiles += nb_ - 1 - pos;
  }
  return tiles;
}

int64_t PrefixBlocks::upper(size_t nv, size_t nd) {
  move_bounds(std::min(nv, vdraw_blocks_.size()), std::min(nd, odraws_.size()));
  return slash_tiles_ + gathered_upper();
}

int64_t PrefixBlocks::upper_by_sweep(size_t nv, size_t nd) {
  move_bounds(std::min(nv, vdraw_blocks_.size()), std::min(nd, odraws_.size()));
  return slash_tiles_ + gathered_upper_sweep();
}

int64_t PrefixBlocks::gathered_upper_sweep() const {
  int64_t tiles = 0, seen = 0;
  const auto nb = static_cast<size_t>(nb_);
  if ((bk_ & (bk_ - 1)) == 0) {
    const int shift = std::countr_zero(static_cast<uint64_t>(bk_));
    for (size_t qb = 0; qb < nb; ++qb) {
      tiles += (seen + bk_ - 1) >> shift;
      seen += hist_[qb];
    }
    return tiles;
  }
  for (size_t qb = 0; qb < nb; ++qb) {
    tiles += (seen + bk_ - 1) / bk_;
    seen += hist_[qb];
  }
  return tiles;
}

// ---- exact pairs: a moved draw touches its (vertical, diagonal) pairs -------

void PrefixBlocks::cover(int64_t d, int sign) {
  if (d == 0) return;  // diagonal 0 is the query's own block: never gathered from
  if (sign > 0) diagonals_.push_back(static_cast<int32_t>(d));
  else if (diagonals_.back() == d) diagonals_.pop_back();  // prefixes shrink in the order they grew
  else diagonals_.erase(std::find(diagonals_.begin(), diagonals_.end(), d));
  int32_t* corr = corr_.data() + d;
  for (int64_t jb : verticals_) corr[jb] += sign;
  updates_ += static_cast<int64_t>(verticals_.size());
}

void PrefixBlocks::push_vertical(int64_t jb) {
  int32_t* corr = corr_.data() + jb;
  for (int32_t d : diagonals_) ++corr[d];
  updates_ += static_cast<int64_t>(diagonals_.size());
  verticals_.push_back(jb);
}

void PrefixBlocks::pop_vertical() {
  const int64_t jb = verticals_.back();
  verticals_.pop_back();
  int32_t* corr = corr_.data() + jb;
  for (int32_t d : diagonals_) --corr[d];
  updates_ += static_cast<int64_t>(diagonals_.size());
}

void PrefixBlocks::push_offset(int64_t x) {
  for (int64_t d = x / unit_; d <= (x + unit_ - 1) / unit_ && d < nb_; ++d)
    if (cover_[static_cast<size_t>(d)]++ == 0) cover(d, +1);
}

void PrefixBlocks::pop_offset() {
  const int64_t x = odraws_[nd_ - 1];
  for (int64_t d = std::min((x + unit_ - 1) / unit_, nb_ - 1); d >= x / unit_; --d)
    if (--cover_[static_cast<size_t>(d)] == 0) cover(d, -1);
}

void PrefixBlocks::move_pairs(size_t nv, size_t nd) {
  // Shrink first, then grow: fewer pairs are touched on the way.
  for (; nv_ > nv; --nv_)
    if (vdraw_blocks_[nv_ - 1] >= 0) pop_vertical();
  for (; nd_ > nd; --nd_) pop_offset();
  for (; nd_ < nd; ++nd_) push_offset(odraws_[nd_]);
  for (; nv_ < nv; ++nv_)
    if (vdraw_blocks_[nv_] >= 0) push_vertical(vdraw_blocks_[nv_]);
}

int64_t PrefixBlocks::blocks(size_t nv, size_t nd) {
  nv = std::min(nv, vdraw_blocks_.size());
  nd = std::min(nd, odraws_.size());
  move_bounds(nv, nd);
  move_pairs(nv, nd);
  int64_t tiles = slash_tiles_, seen = 0;  // seen: columns in blocks before qb
  const auto nb = static_cast<size_t>(nb_);
  if ((bk_ & (bk_ - 1)) == 0) {  // the usual 64: a shift instead of a division per block (c >= 0)
    const int shift = std::countr_zero(static_cast<uint64_t>(bk_));
    for (size_t qb = 0; qb < nb; ++qb) {
      tiles += (seen - corr_[qb] + bk_ - 1) >> shift;
      seen += hist_[qb];
    }
    return tiles;
  }
  for (size_t qb = 0; qb < nb; ++qb) {
    tiles += (seen - corr_[qb] + bk_ - 1) / bk_;
    seen += hist_[qb];
  }
  return tiles;
}

bool PrefixBlocks::reaches(size_t nv, size_t nd, int64_t min_tiles) {
  nv = std::min(nv, vdraw_blocks_.size());
  nd = std::min(nd, odraws_.size());
  move_bounds(nv, nd);
  if (slash_tiles_ >= min_tiles) return true;
  if (slash_tiles_ + gathered_upper() < min_tiles) return false;
  ++exact_;
  return blocks(nv, nd) >= min_tiles;
}

}  // namespace rm::sparsity
