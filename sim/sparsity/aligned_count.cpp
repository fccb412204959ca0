#include "sim/sparsity/aligned_count.hpp"

#include <algorithm>

#include "sim/sparsity/pair_count.hpp"

namespace rm::sparsity {

namespace {

int64_t mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// Slash blocks of a query row as offsets j' = i*r - j (r = Bq/Bk), from
// -(r-1) (key blocks inside the query block) upwards, with the slash pairs of
// one such block pair — both independent of i, because slash pairs depend on
// q - k only.
struct RelativeBlocks {
  std::vector<int64_t> offset;  // sorted j'
  std::vector<int64_t> pairs;   // slash pairs of the block pair at that offset (when asked for)
};

RelativeBlocks relative_slash_blocks(const IntervalSet& slashes, BlockShape s, int64_t nk, bool with_pairs) {
  const int64_t r = s.bq / s.bk;
  std::vector<Interval> cand;  // j' whose q - k range [j'Bk - Bk + 1, j'Bk + Bq - 1] meets an offset
  for (const auto& d : slashes.intervals())
    cand.push_back({std::max(-(r - 1), ceil_div(d.lo - s.bq + 1, s.bk)),
                    std::min(nk, floor_div(d.hi - 1 + s.bk - 1, s.bk) + 1)});
  const IntervalSet offsets(std::move(cand));
  RelativeBlocks rel;
  for (const auto& c : offsets.intervals()) {
    for (int64_t j = c.lo; j < c.hi; ++j) {
      int64_t q0 = (j + r) * s.bk;  // shifted by r blocks so both ranges are non-negative
      rel.offset.push_back(j);
      if (with_pairs) rel.pairs.push_back(offset_pairs({q0, q0 + s.bq}, {r * s.bk, r * s.bk + s.bk}, slashes));
    }
  }
  return rel;
}

// Vertical tokens per key block holding any: count and sum of positions.
struct ColumnBlock {
  int64_t block = 0;
  int64_t count = 0;
  int64_t sum = 0;
};

std::vector<ColumnBlock> column_blocks(const IntervalSet& verticals, int64_t bk) {
  std::vector<ColumnBlock> cb;
  for (const auto& v : verticals.intervals()) {
    for (int64_t j = v.lo / bk; j <= (v.hi - 1) / bk; ++j) {
      int64_t lo = std::max(v.lo, j * bk), hi = std::min(v.hi, (j + 1) * bk);
      if (cb.empty() || cb.back().block != j) cb.push_back({j, 0, 0});
      cb.back().count += hi - lo;
      cb.back().sum += (lo + hi - 1) * (hi - lo) / 2;
    }
  }
  return cb;
}

// R split by residue of j' mod r: vertical block j meets row i = (j + j')/r
// only for j' ≡ -j (mod r).
std::vector<std::vector<int64_t>> by_residue(const std::vector<int64_t>& offsets, int64_t r) {
  std::vector<std::vector<int64_t>> cls(static_cast<size_t>(r));
  for (int64_t j : offsets) cls[static_cast<size_t>(mod(j, r))].push_back(j);
  return cls;
}

}  // namespace

bool aligned_supported(const HeadPattern& p, BlockShape s) {
  return p.slash_unit() == 1 && p.doc_starts().empty() && s.bq >= s.bk && s.bq % s.bk == 0;
}

AlignedLayout aligned_layout(BlockOwners q, BlockOwners k, BlockShape s) {
  const int64_t r = s.bq / s.bk;
  const auto nq = std::max(static_cast<int64_t>(q.owner.size()), (static_cast<int64_t>(k.owner.size()) + r - 1) / r);
  q.owner.resize(static_cast<size_t>(nq), -1);
  k.owner.resize(static_cast<size_t>(nq * r), -1);
  AlignedLayout out{std::move(q), std::move(k), 0, {}, {}};
  out.k_period = owner_period(out.k.owner);
  out.k_segments = owner_segments(out.k.owner);
  // Frames are kept only when a call is estimated cheaper than a row sweep by period or segments.
  const auto rows = std::min<int64_t>(out.k_period, static_cast<int64_t>(out.k_segments.size()));
  out.frames = choose_frames(out.q.owner, out.k.owner, r, static_cast<double>(nq) * static_cast<double>(rows));
  return out;
}

void add_relative_blocks(const AlignedLayout& layout, int64_t r, const std::vector<int64_t>& offset,
                         const std::vector<int64_t>& pairs, std::vector<TileCost>& out) {
  const BlockOwners& qo = layout.q;
  const BlockOwners& ko = layout.k;
  const auto nq = static_cast<int64_t>(qo.owner.size());
  const int64_t nk = nq * r;
  const int wk = ko.owners;
  auto at = [&](int a, int b) -> TileCost& { return out[static_cast<size_t>(a) * static_cast<size_t>(wk) + static_cast<size_t>(b)]; };
  auto kown = [&](int64_t j) { return ko.owner[static_cast<size_t>(j)]; };

  // Key owners of SB(i): periodic ownership reads a residue histogram of the
  // offsets already in range (j' <= i*r), O(period) per row; otherwise prefix
  // sums over R give each owner segment in O(1), O(segments) per row.
  const int64_t period = layout.k_period;
  const std::vector<OwnerSegment>& segs = layout.k_segments;
  const bool periodic = period <= static_cast<int64_t>(segs.size());
  // Many short segments (the balanced partition: a 128-token chunk per
  // segment, no period): walk R's runs of consecutive offsets instead, each
  // over the segments its key blocks span, when that is cheaper per row.
  std::vector<Interval> rruns;  // j' in [lo, hi)
  for (int64_t j : offset) {
    if (!rruns.empty() && rruns.back().hi == j) ++rruns.back().hi;
    else rruns.push_back({j, j + 1});
  }
  int64_t owned = 0;
  for (const auto& sg : segs) owned += sg.end - sg.begin;
  const double mean_seg = segs.empty() ? 1.0 : static_cast<double>(owned) / static_cast<double>(segs.size());
  const double walk_row = 2.0 * static_cast<double>(rruns.size()) + static_cast<double>(offset.size()) / mean_seg;
  const bool walk = !periodic && walk_row < static_cast<double>(segs.size());
  const double row = periodic ? static_cast<double>(period) : std::min(walk_row, static_cast<double>(segs.size()));
  if (layout.frames.p > 0 && frame_sweep_cost(layout.frames, offset.size()) < static_cast<double>(nq) * row) {
    add_frame_blocks(layout.frames, offset, pairs, wk, out);
    return;
  }
  std::vector<size_t> first_seg;  // first segment with end > key block x, x in [0, nk]
  if (walk) {
    first_seg.resize(static_cast<size_t>(nk + 1));
    size_t g = 0;
    for (int64_t x = 0; x <= nk; ++x) {
      while (g < segs.size() && segs[g].end <= x) ++g;
      first_seg[static_cast<size_t>(x)] = g;
    }
  }
  std::vector<int64_t> hist_blocks, hist_pairs, pre_blocks, pre_pairs;
  if (periodic) {
    hist_blocks.assign(static_cast<size_t>(period), 0);
    hist_pairs.assign(static_cast<size_t>(period), 0);
  } else {  // prefix over index j' + r - 1
    pre_blocks.assign(static_cast<size_t>(nk + r), 0);
    pre_pairs.assign(static_cast<size_t>(nk + r), 0);
    for (size_t e = 0; e < offset.size(); ++e) {
      pre_blocks[static_cast<size_t>(offset[e] + r)] += 1;
      pre_pairs[static_cast<size_t>(offset[e] + r)] += pairs[e];
    }
    for (size_t x = 1; x < pre_blocks.size(); ++x) {
      pre_blocks[x] += pre_blocks[x - 1];
      pre_pairs[x] += pre_pairs[x - 1];
    }
  }

  size_t next_rel = 0;
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t ir = i * r;
    if (periodic)
      for (; next_rel < offset.size() && offset[next_rel] <= ir; ++next_rel) {
        hist_blocks[static_cast<size_t>(mod(offset[next_rel], period))] += 1;
        hist_pairs[static_cast<size_t>(mod(offset[next_rel], period))] += pairs[next_rel];
      }
    const int pq = qo.owner[static_cast<size_t>(i)];
    if (pq < 0) continue;
    if (periodic) {
      for (int64_t c = 0; c < period; ++c) {
        if (hist_blocks[static_cast<size_t>(c)] == 0) continue;
        if (int o = kown(mod(ir - c, period)); o >= 0)
          at(pq, o) += TileCost{hist_blocks[static_cast<size_t>(c)], hist_pairs[static_cast<size_t>(c)]};
      }
    } else if (walk) {
      for (size_t e = 0; e < rruns.size() && rruns[e].lo <= ir; ++e) {
        const int64_t kb_lo = ir - std::min(rruns[e].hi, ir + 1) + 1, kb_hi = ir - rruns[e].lo + 1;  // key blocks
        for (size_t g = first_seg[static_cast<size_t>(kb_lo)]; g < segs.size() && segs[g].begin < kb_hi; ++g) {
          // key blocks [a, b)  <=>  j' in (ir - b, ir - a], prefix indices ir - b + r, ir - a + r
          const int64_t a = std::max(kb_lo, segs[g].begin), b = std::min(kb_hi, segs[g].end);
          const auto lo = static_cast<size_t>(ir - b + r), hi = static_cast<size_t>(ir - a + r);
          at(pq, segs[g].owner) += TileCost{pre_blocks[hi] - pre_blocks[lo], pre_pairs[hi] - pre_pairs[lo]};
        }
      }
    } else {
      for (const auto& sg : segs) {  // j in [begin, end)  <=>  j' in [ir - end + 1, ir - begin]
        int64_t lo = std::max(ir - sg.end + 1, -(r - 1)) + r - 1, hi = ir - sg.begin + r;  // prefix indices
        if (hi <= lo) continue;
        at(pq, sg.owner) += TileCost{pre_blocks[static_cast<size_t>(hi)] - pre_blocks[static_cast<size_t>(lo)],
                                     pre_pairs[static_cast<size_t>(hi)] - pre_pairs[static_cast<size_t>(lo)]};
      }
    }
  }
}

std::vector<TileCost> aligned_costs(const HeadPattern& p, const AlignedLayout& layout, BlockShape s) {
  const BlockOwners& qo = layout.q;
  const BlockOwners& ko = layout.k;
  const int64_t r = s.bq / s.bk;
  const auto nq = static_cast<int64_t>(qo.owner.size());
  const int64_t nk = nq * r, n_tokens = nq * s.bq;
  const int wk = ko.owners;
  std::vector<TileCost> out(static_cast<size_t>(qo.owners) * static_cast<size_t>(wk));
  auto at = [&](int a, int b) -> TileCost& { return out[static_cast<size_t>(a) * static_cast<size_t>(wk) + static_cast<size_t>(b)]; };
  auto kown = [&](int64_t j) { return ko.owner[static_cast<size_t>(j)]; };
  auto qown = [&](int64_t i) { return qo.owner[static_cast<size_t>(i)]; };

  const IntervalSet verticals = p.verticals().clipped(0, n_tokens);
  const IntervalSet slashes = p.slashes().clipped(0, n_tokens);
  const std::vector<ColumnBlock> cb = column_blocks(verticals, s.bk);
  const RelativeBlocks rel = relative_slash_blocks(slashes, s, nk, true);
  add_relative_blocks(layout, r, rel.offset, rel.pairs, out);

  std::vector<int64_t> seen_blocks(static_cast<size_t>(wk), 0);  // vertical blocks j < (i+1)r per owner
  std::vector<int64_t> seen_cols(static_cast<size_t>(wk), 0);    // verticals in blocks j < ir per owner
  size_t next_block = 0, next_col = 0;  // into cb: blocks < (i+1)r, blocks < ir
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t ir = i * r;
    for (; next_col < cb.size() && cb[next_col].block < ir; ++next_col)
      if (int o = kown(cb[next_col].block); o >= 0) seen_cols[static_cast<size_t>(o)] += cb[next_col].count;
    for (; next_block < cb.size() && cb[next_block].block < ir + r; ++next_block)
      if (int o = kown(cb[next_block].block); o >= 0) seen_blocks[static_cast<size_t>(o)] += 1;
    const int pq = qown(i);
    if (pq < 0 || cb.empty()) continue;
    // Verticals: whole columns before the query block, a triangle inside it.
    for (int o = 0; o < wk; ++o) {
      at(pq, o).blocks += seen_blocks[static_cast<size_t>(o)];
      at(pq, o).nnz += s.bq * seen_cols[static_cast<size_t>(o)];
    }
    for (size_t c = next_col; c < next_block; ++c)  // column blocks inside the query block
      if (int o = kown(cb[c].block); o >= 0) at(pq, o).nnz += cb[c].count * (i + 1) * s.bq - cb[c].sum;
  }

  // Blocks that are both: vertical block j in SB(i) for i = (j + j')/r.
  const auto cls = by_residue(rel.offset, r);
  for (const auto& c : cb) {
    const int64_t j = c.block;
    const int o = kown(j);
    if (o < 0) continue;
    for (int64_t jr : cls[static_cast<size_t>(mod(-j, r))]) {
      if (j + jr >= nk) break;
      if (int pq = qown((j + jr) / r); pq >= 0) at(pq, o).blocks -= 1;
    }
  }
  // Pairs that are both: vertical v and query v + d for an offset d.
  for (const auto& v : verticals.intervals()) {
    for (int64_t t = v.lo; t < v.hi; ++t) {
      int o = kown(t / s.bk);
      if (o < 0) continue;
      for (const auto& d : slashes.intervals()) {
        if (t + d.lo >= n_tokens) break;
        const int64_t a = t + d.lo, b = std::min(n_tokens, t + d.hi);
        for (int64_t i = a / s.bq; i * s.bq < b; ++i)
          if (int pq = qown(i); pq >= 0) at(pq, o).nnz -= std::min(b, (i + 1) * s.bq) - std::max(a, i * s.bq);
      }
    }
  }
  return out;
}

bool aligned_chunk_rows_supported(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape s) {
  return aligned_supported(p, s) && seq_len >= 0 && chunk_tokens >= 1 && seq_len % s.bq == 0 && chunk_tokens % s.bq == 0;
}

std::vector<TileCost> aligned_chunk_row_costs(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape s) {
  const int64_t r = s.bq / s.bk, nq = seq_len / s.bq, nk = nq * r, per = chunk_tokens / s.bq;
  const int64_t chunks = (seq_len + chunk_tokens - 1) / chunk_tokens;
  std::vector<TileCost> out(static_cast<size_t>(chunks));
  if (nq == 0) return out;
  const IntervalSet verticals = p.verticals().clipped(0, seq_len);
  const IntervalSet slashes = p.slashes().clipped(0, seq_len);
  const std::vector<ColumnBlock> cb = column_blocks(verticals, s.bk);
  const RelativeBlocks rel = relative_slash_blocks(slashes, s, nk, true);

  // Blocks both column and slash per query block: column block j and j' in R
  // with j + j' = i·r, so j' ≡ -j (mod r); j + j' >= 0 always (j' > -r).
  std::vector<int64_t> both(static_cast<size_t>(nq), 0);
  const auto cls = by_residue(rel.offset, r);
  for (const auto& c : cb)
    for (int64_t jr : cls[static_cast<size_t>(mod(-c.block, r))]) {
      if (c.block + jr >= nk) break;
      ++both[static_cast<size_t>((c.block + jr) / r)];
    }

  // One sweep over query blocks: vertical blocks j < (i+1)r, verticals in
  // blocks j < ir (whole columns), R's offsets j' <= ir with their pairs.
  size_t next_block = 0, next_col = 0, next_rel = 0;
  int64_t vblocks = 0, cols = 0, sblocks = 0, spairs = 0;
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t ir = i * r;
    for (; next_col < cb.size() && cb[next_col].block < ir; ++next_col) cols += cb[next_col].count;
    for (; next_block < cb.size() && cb[next_block].block < ir + r; ++next_block) ++vblocks;
    for (; next_rel < rel.offset.size() && rel.offset[next_rel] <= ir; ++next_rel) {
      ++sblocks;
      spairs += rel.pairs[next_rel];
    }
    TileCost t{vblocks + sblocks - both[static_cast<size_t>(i)], spairs + s.bq * cols};
    for (size_t c = next_col; c < next_block; ++c)  // column blocks inside the query block: a triangle
      t.nnz += cb[c].count * (i + 1) * s.bq - cb[c].sum;
    out[static_cast<size_t>(i / per)] += t;
  }

  // Pairs both column and slash: queries [v + d.lo, v + d.hi) for vertical v
  // and offset interval d. Each run adds +1 from its start and -1 from its
  // end; per chunk bucket, the events' weight and weighted position give
  // F(X) = #{such pairs with query < X} = X·Σw - Σw·pos at chunk edges.
  if (!verticals.empty() && !slashes.empty()) {
    std::vector<int64_t> ev_w(static_cast<size_t>(chunks), 0), ev_wp(static_cast<size_t>(chunks), 0);
    auto event = [&](int64_t pos, int64_t w) {
      const auto b = static_cast<size_t>(pos / chunk_tokens);
      ev_w[b] += w;
      ev_wp[b] += w * pos;
    };
    for (const auto& v : verticals.intervals())
      for (int64_t t = v.lo; t < v.hi; ++t)
        for (const auto& d : slashes.intervals()) {
          if (t + d.lo >= seq_len) break;
          event(t + d.lo, 1);
          if (t + d.hi < seq_len) event(t + d.hi, -1);
        }
    int64_t w = 0, wp = 0, f_lo = 0;  // events before the chunk's start, F at it
    for (int64_t c = 0; c < chunks; ++c) {
      w += ev_w[static_cast<size_t>(c)];
      wp += ev_wp[static_cast<size_t>(c)];
      const int64_t x = std::min(seq_len, (c + 1) * chunk_tokens), f_hi = x * w - wp;
      out[static_cast<size_t>(c)].nnz -= f_hi - f_lo;
      f_lo = f_hi;
    }
  }
  return out;
}

int64_t aligned_total_blocks(const HeadPattern& p, int64_t n_tokens, BlockShape s) {
  const int64_t r = s.bq / s.bk, nq = n_tokens / s.bq, nk = nq * r;
  const std::vector<ColumnBlock> cb = column_blocks(p.verticals().clipped(0, n_tokens), s.bk);
  const RelativeBlocks rel = relative_slash_blocks(p.slashes().clipped(0, n_tokens), s, nk, false);
  int64_t n = 0;
  for (const auto& c : cb) n += nq - c.block / r;                            // rows with (i+1)r > j
  for (int64_t jr : rel.offset) n += nq - ceil_div(std::max<int64_t>(jr, 0), r);  // rows with ir >= j'
  const auto cls = by_residue(rel.offset, r);
  for (const auto& c : cb) {
    const auto& same = cls[static_cast<size_t>(mod(-c.block, r))];
    n -= std::upper_bound(same.begin(), same.end(), nk - 1 - c.block) - same.begin();
  }
  return n;
}

}  // namespace rm::sparsity
