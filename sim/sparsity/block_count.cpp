#include "sim/sparsity/block_count.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <optional>

#include "sim/sparsity/aligned_count.hpp"
#include "sim/sparsity/pair_count.hpp"

namespace rm::sparsity {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool selected(const HeadPattern& p, int64_t qb, int64_t kb) {
  const int64_t u = p.slash_unit();
  return p.slashes().contains(qb - kb) || (p.kind() == PatternKind::block_sparse && p.verticals().contains(kb * u));
}

// ---- general path ----------------------------------------------------------

struct Piece {
  int64_t block = 0;
  int64_t first = 0, last = 0;    // smallest and largest token
  std::vector<Interval> ranges;  // global ranges, local order
};

// Runs of <= limit consecutive local rows inside one u-block.
std::vector<Piece> cut_pieces(const TokenSet& t, int64_t u, int64_t limit) {
  std::vector<Piece> out;
  int64_t rows = 0;
  for (int64_t x : t.tokens()) {
    if (out.empty() || out.back().block != x / u || rows == limit) {
      out.push_back({x / u, x, x, {}});
      rows = 0;
    }
    Piece& pc = out.back();
    if (!pc.ranges.empty() && pc.ranges.back().hi == x) ++pc.ranges.back().hi;
    else pc.ranges.push_back({x, x + 1});
    pc.first = std::min(pc.first, x);
    pc.last = std::max(pc.last, x);
    ++rows;
  }
  return out;
}

TileCost general_pair(const HeadPattern& p, const std::vector<Piece>& segs, const std::vector<Piece>& chunks,
                      const std::vector<int64_t>& key_verticals, int64_t bk) {
  TileCost c;
  for (const auto& sg : segs) {
    for (const auto& ch : chunks) {
      if (ch.first > sg.last) continue;  // causally empty
      for (const auto& q : sg.ranges)
        for (const auto& k : ch.ranges) c.nnz += allowed_pairs(p, q, k);
      if (selected(p, sg.block, ch.block)) ++c.blocks;
    }
    if (p.kind() != PatternKind::vertical_slash) continue;
    int64_t gathered = 0;
    for (int64_t v : key_verticals) {
      if (v > sg.last) break;
      gathered += !selected(p, sg.block, v / p.slash_unit());
    }
    c.blocks += ceil_div(gathered, bk);
  }
  return c;
}

// ---- fast path ---------------------------------------------------------------

// One set's tokens inside one block, relative to the block start.
struct Occupant {
  int set = 0;
  int64_t n = 0;
  std::vector<Interval> pieces;
  std::vector<int64_t> seg_last;    // per segment of <= Bq rows: its last (largest) token
  std::vector<int64_t> chunk_first;  // per chunk of <= Bk rows: its first token
};

// Blocks of one side grouped into classes of equal occupancy.
struct Side {
  std::vector<int> cls;                        // per block; -1: empty
  std::vector<std::vector<Occupant>> classes;  // occupants, by set
};

// nullopt when some set's local order is not increasing.
std::optional<Side> make_side(const std::vector<TokenSet>& sets, int64_t u, int64_t nb, BlockShape s) {
  std::vector<std::vector<int64_t>> occ(static_cast<size_t>(nb));  // per block: (set, lo, hi) triples
  for (size_t si = 0; si < sets.size(); ++si) {
    int64_t end = -1;
    for (const auto& r : sets[si].runs) {
      if (r.len <= 0) continue;
      for (int64_t c = 0; c < r.count; ++c) {
        const int64_t a = r.begin + c * r.stride, b = a + r.len;
        if (a < end || a < 0) return std::nullopt;
        end = b;
        for (int64_t x = a; x < b;) {
          const int64_t blk = x / u, hi = std::min(b, (blk + 1) * u);
          auto& o = occ[static_cast<size_t>(blk)];
          const auto set = static_cast<int64_t>(si);
          if (o.size() >= 3 && o[o.size() - 3] == set && o.back() == x - blk * u) o.back() = hi - blk * u;
          else o.insert(o.end(), {set, x - blk * u, hi - blk * u});
          x = hi;
        }
      }
    }
  }
  Side side;
  side.cls.assign(static_cast<size_t>(nb), -1);
  std::map<std::vector<int64_t>, int> ids;
  for (int64_t b = 0; b < nb; ++b) {
    auto& o = occ[static_cast<size_t>(b)];
    if (o.empty()) continue;
    auto [it, fresh] = ids.emplace(std::move(o), static_cast<int>(side.classes.size()));
    side.cls[static_cast<size_t>(b)] = it->second;
    if (!fresh) continue;
    std::vector<Occupant> cl;
    const auto& key = it->first;
    for (size_t i = 0; i < key.size(); i += 3) {
      if (cl.empty() || cl.back().set != key[i]) cl.push_back({static_cast<int>(key[i]), 0, {}, {}, {}});
      cl.back().pieces.push_back({key[i + 1], key[i + 2]});
      cl.back().n += key[i + 2] - key[i + 1];
    }
    for (auto& oc : cl) {  // the rows of one set in a block are consecutive local rows
      int64_t row = 0;
      for (const auto& pc : oc.pieces)
        for (int64_t x = pc.lo; x < pc.hi; ++x, ++row) {
          if (row % s.bk == 0) oc.chunk_first.push_back(x);
          if (row % s.bq == s.bq - 1 || row == oc.n - 1) oc.seg_last.push_back(x);
        }
    }
    side.classes.push_back(std::move(cl));
  }
  return side;
}

struct Layout {
  int64_t nb = 0;
  Side q, k;
  AlignedLayout classes;  // class sequences, for add_relative_blocks
  int64_t q_period = 0;   // smallest p with q.cls[b] == q.cls[b - p] for every b >= p
};

// Smallest period of a sequence (its length minus its longest proper border).
int64_t smallest_period(const std::vector<int>& x) {
  const size_t n = x.size();
  if (n == 0) return 0;
  std::vector<size_t> border(n, 0);
  for (size_t i = 1, k = 0; i < n; ++i) {
    while (k > 0 && x[i] != x[k]) k = border[k - 1];
    if (x[i] == x[k]) ++k;
    border[i] = k;
  }
  return static_cast<int64_t>(n - border[n - 1]);
}

BlockOwners owners_of(const Side& s) { return {s.cls, static_cast<int>(s.classes.size())}; }

int64_t extent(const std::vector<TokenSet>& sets) {
  int64_t hi = 0;
  for (const auto& t : sets)
    for (const auto& r : t.runs)
      if (r.len > 0 && r.count > 0) hi = std::max(hi, r.begin + (r.count - 1) * r.stride + r.len);
  return hi;
}

// pair_costs asks once per head with the same sets: keep the last layout.
const Layout* layout_for(const std::vector<TokenSet>& q, const std::vector<TokenSet>& k, int64_t u, BlockShape s) {
  struct Last {
    std::vector<TokenSet> q, k;
    int64_t u = 0, bq = 0, bk = 0;
    std::optional<Layout> layout;
  };
  thread_local Last last;
  if (last.u == u && last.bq == s.bq && last.bk == s.bk && last.q == q && last.k == k)
    return last.layout ? &*last.layout : nullptr;
  last = {q, k, u, s.bq, s.bk, std::nullopt};
  const int64_t nb = ceil_div(std::max(extent(q), extent(k)), u);
  auto qs = make_side(q, u, nb, s);
  auto ks = make_side(k, u, nb, s);
  if (qs && ks) {
    AlignedLayout cl = aligned_layout(owners_of(*qs), owners_of(*ks), {1, 1});
    const int64_t period = smallest_period(qs->cls);
    last.layout = Layout{nb, std::move(*qs), std::move(*ks), std::move(cl), period};
  }
  return last.layout ? &*last.layout : nullptr;
}

// Per period position j in [0, P): how many blocks of the added intervals are
// = j mod P, weighted: [lo, hi) holds hi/P - lo/P blocks at every position and
// one more at each position below hi mod P, one fewer below lo mod P.
class ResidueCount {
 public:
  void reset(int64_t period) {
    p_ = period;
    base_ = 0;
    step_.assign(static_cast<size_t>(period), 0);
  }
  void add(int64_t lo, int64_t hi, int64_t g) {  // 0 <= lo <= hi
    base_ += g * (hi / p_ - lo / p_);
    step_[static_cast<size_t>(hi % p_)] += g;
    step_[static_cast<size_t>(lo % p_)] -= g;
  }
  // out[j] += the count at position j; then empty again.
  void flush(int64_t* out) {
    int64_t above = 0;
    for (int64_t j = p_ - 1; j >= 0; --j) {
      out[j] += base_ + above;
      above += step_[static_cast<size_t>(j)];
      step_[static_cast<size_t>(j)] = 0;
    }
    base_ = 0;
  }

 private:
  int64_t p_ = 1, base_ = 0;
  std::vector<int64_t> step_;
};

// The gathered sums of a key set with at most Bk verticals (GatherSweep::few_verticals).
// c(qb) = #{jb in V: jb < qb, qb - jb off the diagonals `ahead`} <= |V| <= Bk, so a
// query block gathers ceil(c / Bk) = [c > 0] tiles: the tiles are the blocks after
// the first vertical less Z, those where every vertical below sits on a diagonal
// (Z = (jb_min, nb) ∩ each jb's ([0, jb] ∪ (jb + ahead)): a few intervals, found by
// intersecting). The columns sum c, linear in V: per vertical, the blocks after it
// less those on its shifted diagonals, the diagonals whole below nb read from a
// table of prefix residue counts (rotated by jb mod P) and at most one cut by nb.
// Both per period position of the query classes; no walk over the blocks.
class FewVerticals {
 public:
  // False when the table would not fit (kMaxTable entries): the other sweeps then.
  static constexpr int64_t kMaxTable = int64_t(1) << 20;
  bool prepare(const std::vector<Interval>& ahead, int64_t period) {
    if (period <= 0 || (static_cast<int64_t>(ahead.size()) + 1) * period > kMaxTable) return false;
    ahead_ = &ahead;
    p_ = period;
    const size_t P = static_cast<size_t>(period);
    hi_.clear();
    prefix_.assign((ahead.size() + 1) * P, 0);
    for (size_t d = 0; d < ahead.size(); ++d) {
      hi_.push_back(ahead[d].hi);
      const int64_t base = ahead[d].hi / period - ahead[d].lo / period;
      const int64_t rh = ahead[d].hi % period, rl = ahead[d].lo % period;
      const int64_t* row = prefix_.data() + d * P;
      int64_t* next = prefix_.data() + (d + 1) * P;
      for (int64_t j = 0; j < period; ++j) next[j] = row[j] + base + (j < rh) - (j < rl);
    }
    return true;
  }
  // tiles[j], cols[j] (size P, zeroed by the caller) for the verticals' blocks v.
  void sums(const std::vector<int64_t>& v, int64_t nb, int64_t* tiles, int64_t* cols) {
    const auto& A = *ahead_;
    const size_t P = static_cast<size_t>(p_);
    const int64_t jb_min = *std::min_element(v.begin(), v.end());
    if (jb_min + 1 >= nb) return;
    // Columns.
    rc_.reset(p_);
    size_t k = A.size();  // intervals with hi <= nb - jb; v ascends (else searched), so k only falls
    int64_t last = -1;
    for (int64_t jb : v) {
      rc_.add(jb + 1, nb, 1);
      if (jb < last) k = static_cast<size_t>(std::upper_bound(hi_.begin(), hi_.end(), nb - jb) - hi_.begin());
      while (k > 0 && hi_[k - 1] > nb - jb) --k;
      last = jb;
      if (k < A.size() && jb + A[k].lo < nb) rc_.add(jb + A[k].lo, nb, -1);
      const int64_t* row = prefix_.data() + k * P;
      const auto r = static_cast<size_t>(jb % p_);
      for (size_t j = r; j < P; ++j) cols[j] -= row[j - r];
      for (size_t j = 0; j < r; ++j) cols[j] -= row[j + P - r];
    }
    rc_.flush(cols);
    // Tiles: the blocks after jb_min, less Z.
    z_.clear();
    for (const Interval& d : A) {
      if (jb_min + d.lo >= nb) break;
      z_.push_back({jb_min + d.lo, std::min(nb, jb_min + d.hi)});
    }
    for (int64_t jb : v) {
      if (z_.empty()) break;
      if (jb == jb_min) continue;
      next_.clear();
      size_t d = 0;  // the first interval with hi > lo - jb: z_ ascends, so it is searched above the last
      for (const Interval& z : z_) {
        if (z.hi <= jb + 1) {
          next_.push_back(z);
          continue;
        }
        int64_t lo = z.lo;
        if (lo < jb + 1) next_.push_back({lo, jb + 1}), lo = jb + 1;
        d = static_cast<size_t>(std::upper_bound(hi_.begin() + static_cast<std::ptrdiff_t>(d), hi_.end(), lo - jb) - hi_.begin());
        for (size_t e = d; e < A.size() && jb + A[e].lo < z.hi; ++e)
          next_.push_back({std::max(lo, jb + A[e].lo), std::min(z.hi, jb + A[e].hi)});
      }
      std::swap(z_, next_);
    }
    rc_.reset(p_);
    rc_.add(jb_min + 1, nb, 1);
    for (const Interval& z : z_) rc_.add(z.lo, z.hi, -1);
    rc_.flush(tiles);
  }

 private:
  const std::vector<Interval>* ahead_ = nullptr;
  int64_t p_ = 0;
  std::vector<int64_t> hi_;      // per diagonal interval: its hi (ascending)
  std::vector<int64_t> prefix_;  // row k, position j: blocks = j mod P in the first k intervals
  ResidueCount rc_;
  std::vector<Interval> z_, next_;
};

int64_t causal_pairs(const std::vector<Interval>& q, const std::vector<Interval>& k) {
  static const IntervalSet all({{0, kUnbounded}});
  int64_t n = 0;
  for (const auto& a : q)
    for (const auto& b : k) n += offset_pairs(a, b, all);
  return n;
}

std::vector<TileCost> fast_costs(const HeadPattern& p, const Layout& L, size_t nq_sets, size_t nk_sets, BlockShape s,
                                 GatherSweep sweep) {
  const int64_t nb = L.nb, u = p.slash_unit();
  const auto& qcls = L.q.cls;
  const auto& kcls = L.k.cls;
  const size_t qC = L.q.classes.size(), kC = L.k.classes.size();
  std::vector<TileCost> out(nq_sets * nk_sets);
  auto at = [&](int a, int b) -> TileCost& { return out[static_cast<size_t>(a) * nk_sets + static_cast<size_t>(b)]; };
  const IntervalSet& diag = p.slashes();
  const bool sparse_cols = p.kind() == PatternKind::block_sparse;
  const IntervalSet cols = sparse_cols ? p.verticals() : IntervalSet();  // whole column blocks (tokens)

  // Block pairs below the diagonal per class pair: block diagonals d >= 1 ...
  const IntervalSet ahead_set = diag.clipped(1, nb);
  const std::vector<Interval>& ahead = ahead_set.intervals();
  std::vector<int64_t> offsets;
  for (const auto& d : ahead)
    for (int64_t x = d.lo; x < d.hi; ++x) offsets.push_back(x);
  // Scratch kept per thread: at W = 1,024 these are 16 MB each, and fresh
  // pages per head cost more than the counting.
  thread_local std::vector<TileCost> n_cls;
  n_cls.assign(qC * kC, TileCost{});
  add_relative_blocks(L.classes, 1, offsets, std::vector<int64_t>(offsets.size(), 0), n_cls);
  // ... and column blocks kb < qb off those diagonals.
  const IntervalSet col_set = cols.clipped(0, nb * u);
  for (const auto& c : col_set.intervals())
    for (int64_t kb = c.lo / u; kb < ceil_div(c.hi, u); ++kb) {
      if (kcls[static_cast<size_t>(kb)] < 0) continue;
      for (int64_t qb = kb + 1; qb < nb; ++qb)
        if (qcls[static_cast<size_t>(qb)] >= 0 && !diag.contains(qb - kb))
          n_cls[static_cast<size_t>(qcls[static_cast<size_t>(qb)]) * kC + static_cast<size_t>(kcls[static_cast<size_t>(kb)])].blocks += 1;
    }
  for (size_t a = 0; a < qC; ++a)
    for (size_t b = 0; b < kC; ++b) {
      const int64_t n = n_cls[a * kC + b].blocks;
      if (n == 0) continue;
      for (const auto& qo : L.q.classes[a])
        for (const auto& ko : L.k.classes[b])
          at(qo.set, ko.set) += TileCost{n * static_cast<int64_t>(qo.seg_last.size() * ko.chunk_first.size()), n * qo.n * ko.n};
    }

  // Diagonal blocks, selected by diagonal 0 or (block-sparse) a column: per
  // class pair. A map lookup per block was a visible share at W = 1,024: each query
  // class keeps a run of its last key class, flushed to the map on a change
  // (stripes never change it).
  std::map<std::pair<int, int>, int64_t> diag_blocks;
  std::vector<int> run_k(qC, -1);
  std::vector<int64_t> run_n(qC, 0);
  const bool diag0 = diag.contains(0);  // selected(p, b, b) for every b, unless a column selects it
  for (int64_t b = 0; b < nb; ++b) {
    const int qc = qcls[static_cast<size_t>(b)], kc = kcls[static_cast<size_t>(b)];
    if (qc < 0 || kc < 0 || !(diag0 || selected(p, b, b))) continue;
    const auto q = static_cast<size_t>(qc);
    if (run_k[q] != kc) {
      if (run_n[q] > 0) diag_blocks[{qc, run_k[q]}] += run_n[q];
      run_k[q] = kc, run_n[q] = 0;
    }
    ++run_n[q];
  }
  for (size_t q = 0; q < qC; ++q)
    if (run_n[q] > 0) diag_blocks[{static_cast<int>(q), run_k[q]}] += run_n[q];
  for (const auto& [pair, n] : diag_blocks) {
    for (const auto& qo : L.q.classes[static_cast<size_t>(pair.first)])
      for (const auto& ko : L.k.classes[static_cast<size_t>(pair.second)]) {
        int64_t tiles = 0;
        for (int64_t last : qo.seg_last)
          tiles += std::upper_bound(ko.chunk_first.begin(), ko.chunk_first.end(), last) - ko.chunk_first.begin();
        at(qo.set, ko.set) += TileCost{n * tiles, n * causal_pairs(qo.pieces, ko.pieces)};
      }
  }

  if (p.kind() != PatternKind::vertical_slash) return out;
  // Gathered verticals (diagonal 0 is selected, so a query block gathers only
  // verticals of earlier blocks): c(qb, set) = verticals of the set in blocks
  // before qb off every diagonal, from +1 at jb + 1 and -1 over jb + [d.lo, d.hi).
  std::vector<std::vector<int64_t>> vblocks(nk_sets);  // per key set: blocks of its verticals
  const IntervalSet vert_set = p.verticals().clipped(0, nb * u);
  for (const auto& v : vert_set.intervals())
    for (int64_t t = v.lo; t < v.hi; ++t) {
      const int c = kcls[static_cast<size_t>(t / u)];
      if (c < 0) continue;
      const int64_t rel = t - t / u * u;
      for (const auto& ko : L.k.classes[static_cast<size_t>(c)])
        for (const auto& pc : ko.pieces)
          if (rel >= pc.lo && rel < pc.hi) vblocks[static_cast<size_t>(ko.set)].push_back(t / u);
    }
  // delta is all zero between key sets; `touched` marks its nonzero entries below nb (the event sweep).
  std::vector<int64_t> delta(static_cast<size_t>(nb) + 1);
  std::vector<uint64_t> touched(static_cast<size_t>(nb / 64 + 1));
  const int64_t period = L.q_period;
  std::vector<int64_t> hist_tiles(static_cast<size_t>(period)), hist_cols(static_cast<size_t>(period));
  std::vector<int64_t> acc_tiles(qC), acc_cols(qC);
  // Gathered costs by key set first ([ks * nq_sets + q set]), added to `out`
  // by blocks at the end: writing one column of a W x W matrix per key set
  // missed the cache on every entry at W = 1,024.
  thread_local std::vector<TileCost> by_key;
  by_key.assign(nq_sets * nk_sets, TileCost{});
  // c >= 0, so ceil(c / Bk) is a shift for the usual power-of-two Bk (a
  // division per (block, key set) was a visible share of a 4M-token step).
  const int shift = (s.bk & (s.bk - 1)) == 0 ? std::countr_zero(static_cast<uint64_t>(s.bk)) : -1;
  auto tiles_of = [&](int64_t c) { return shift >= 0 ? (c + s.bk - 1) >> shift : ceil_div(c, s.bk); };
  auto fold_periods = [&] {  // per period position's sums to its query class; the histograms emptied
    for (int64_t j = 0; j < period; ++j) {
      const int qc = qcls[static_cast<size_t>(j)];
      if (qc >= 0) {
        acc_tiles[static_cast<size_t>(qc)] += hist_tiles[static_cast<size_t>(j)];
        acc_cols[static_cast<size_t>(qc)] += hist_cols[static_cast<size_t>(j)];
      }
      hist_tiles[static_cast<size_t>(j)] = hist_cols[static_cast<size_t>(j)] = 0;
    }
  };
  auto add_gathered = [&](size_t ks) {  // acc_tiles / acc_cols per query class, to each query set of the class
    for (size_t a = 0; a < qC; ++a) {
      if (acc_cols[a] == 0) continue;
      for (const auto& qo : L.q.classes[a])
        by_key[ks * nq_sets + static_cast<size_t>(qo.set)] +=
            TileCost{static_cast<int64_t>(qo.seg_last.size()) * acc_tiles[a], qo.n * acc_cols[a]};
    }
  };
  thread_local FewVerticals few;
  int few_ready = -1;  // -1: not prepared yet; 0: the table does not fit; 1: ready
  for (size_t ks = 0; ks < nk_sets; ++ks) {
    if (vblocks[ks].empty()) continue;
    const int64_t jb_min = *std::min_element(vblocks[ks].begin(), vblocks[ks].end());
    std::fill(acc_tiles.begin(), acc_tiles.end(), 0);
    std::fill(acc_cols.begin(), acc_cols.end(), 0);
    // Events: +1 at jb + 1 and -1, +1 per diagonal interval (fewer past nb).
    const auto nv = static_cast<double>(vblocks[ks].size());
    const auto events = nv * static_cast<double>(1 + 2 * ahead.size());
    const auto span = static_cast<double>(nb - jb_min);
    if (static_cast<int64_t>(vblocks[ks].size()) <= s.bk && period > 0 &&
        (sweep == GatherSweep::few_verticals ||
         (sweep == GatherSweep::automatic &&
          nv * static_cast<double>(period + 16) + static_cast<double>(ahead.size()) < events + span / 16))) {
      if (few_ready < 0) few_ready = few.prepare(ahead, period) ? 1 : 0;
      if (few_ready == 1) {
        few.sums(vblocks[ks], nb, hist_tiles.data(), hist_cols.data());
        fold_periods();
        add_gathered(ks);
        continue;
      }
    }
    const bool by_events = period > 0 && (sweep == GatherSweep::events ||
                                          (sweep != GatherSweep::dense && 3 * events + static_cast<double>(period) + span / 16 < span));
    for (int64_t jb : vblocks[ks]) {
      delta[static_cast<size_t>(jb + 1)] += 1;
      if (!by_events) {  // the innermost loop of a dense head: no test per interval
        for (const auto& d : ahead) {
          if (jb + d.lo >= nb) break;
          delta[static_cast<size_t>(jb + d.lo)] -= 1;
          delta[static_cast<size_t>(std::min(nb, jb + d.hi))] += 1;
        }
        continue;
      }
      if (jb + 1 < nb) touched[static_cast<size_t>((jb + 1) >> 6)] |= uint64_t(1) << ((jb + 1) & 63);
      for (const auto& d : ahead) {
        if (jb + d.lo >= nb) break;
        const int64_t lo = jb + d.lo, hi = std::min(nb, jb + d.hi);
        delta[static_cast<size_t>(lo)] -= 1;
        delta[static_cast<size_t>(hi)] += 1;
        touched[static_cast<size_t>(lo >> 6)] |= uint64_t(1) << (lo & 63);
        if (hi < nb) touched[static_cast<size_t>(hi >> 6)] |= uint64_t(1) << (hi & 63);
      }
    }
    if (!by_events && 4 * period <= nb) {
      // Periodic classes: c in place by a prefix sum, then summed per period
      // position over contiguous runs (a loop the compiler vectorises; the
      // walk below does a dependent class lookup per block).
      int64_t c = 0;
      for (int64_t qb = jb_min + 1; qb < nb; ++qb) c = delta[static_cast<size_t>(qb)] += c;
      for (int64_t qb = jb_min + 1, j = qb % period; qb < nb; j = 0) {
        const int64_t n = std::min(period - j, nb - qb);
        const int64_t* cv = delta.data() + qb;
        int64_t* pt = hist_tiles.data() + j;
        int64_t* pc = hist_cols.data() + j;
        if (shift >= 0) {
          for (int64_t i = 0; i < n; ++i) pt[i] += static_cast<int64_t>(static_cast<uint64_t>(cv[i] + s.bk - 1) >> shift);
        } else {
          for (int64_t i = 0; i < n; ++i) pt[i] += ceil_div(cv[i], s.bk);
        }
        for (int64_t i = 0; i < n; ++i) pc[i] += cv[i];
        qb += n;
      }
      fold_periods();
      std::fill(delta.begin() + jb_min, delta.end(), 0);
    } else if (!by_events) {
      int64_t c = 0;
      for (int64_t qb = jb_min + 1; qb < nb; ++qb) {  // nothing is gathered before the first column's next block
        c += delta[static_cast<size_t>(qb)];
        const int qc = qcls[static_cast<size_t>(qb)];
        if (c == 0 || qc < 0) continue;
        acc_tiles[static_cast<size_t>(qc)] += tiles_of(c);
        acc_cols[static_cast<size_t>(qc)] += c;
      }
      std::fill(delta.begin() + jb_min, delta.end(), 0);
    } else {
      // c is constant between touched blocks. A change g at block x adds g to
      // every query block qb >= x; with classes of period P, query blocks
      // of period position j below x number floor(x / P) + [j < x mod P], so
      // position j gets g * (total_j - floor(x / P)) - g * [x mod P > j]:
      // two sums and one histogram over x mod P, read once per key set.
      int64_t c = 0, tiles = 0, sum_t = 0, sum_c = 0, far_t = 0, far_c = 0, f = 0, base = 0;
      for (size_t w = static_cast<size_t>((jb_min + 1) >> 6); w < touched.size(); ++w)
        for (uint64_t bits = touched[w]; bits; bits &= bits - 1) {
          const int64_t x = static_cast<int64_t>(w) * 64 + std::countr_zero(bits);
          const int64_t dc = delta[static_cast<size_t>(x)];
          delta[static_cast<size_t>(x)] = 0;
          if (dc == 0) continue;
          c += dc;
          const int64_t t = tiles_of(c), dt = t - tiles;
          tiles = t;
          if (x - base >= period) f = x / period, base = f * period;  // x only grows: divide only past a period
          const auto j = static_cast<size_t>(x - base);
          sum_c += dc, far_c += dc * f, hist_cols[j] += dc;
          if (dt != 0) sum_t += dt, far_t += dt * f, hist_tiles[j] += dt;
        }
      for (size_t w = static_cast<size_t>((jb_min + 1) >> 6); w < touched.size(); ++w) touched[w] = 0;
      delta[static_cast<size_t>(nb)] = 0;
      const int64_t full = nb / period, rem = nb - full * period;
      int64_t above_t = 0, above_c = 0;  // sum of the histograms over positions > j
      for (int64_t j = period - 1; j >= 0; --j) {
        const int qc = qcls[static_cast<size_t>(j)];
        const int64_t total = full + (j < rem);
        if (qc >= 0) {
          acc_tiles[static_cast<size_t>(qc)] += sum_t * total - far_t - above_t;
          acc_cols[static_cast<size_t>(qc)] += sum_c * total - far_c - above_c;
        }
        above_t += hist_tiles[static_cast<size_t>(j)], above_c += hist_cols[static_cast<size_t>(j)];
        hist_tiles[static_cast<size_t>(j)] = hist_cols[static_cast<size_t>(j)] = 0;
      }
    }
    add_gathered(ks);
  }
  constexpr size_t kTile = 32;
  for (size_t a0 = 0; a0 < nq_sets; a0 += kTile)
    for (size_t b0 = 0; b0 < nk_sets; b0 += kTile)
      for (size_t a = a0; a < std::min(nq_sets, a0 + kTile); ++a)
        for (size_t b = b0; b < std::min(nk_sets, b0 + kTile); ++b) out[a * nk_sets + b] += by_key[b * nq_sets + a];
  return out;
}

}  // namespace

bool block_unit(const HeadPattern& p) {
  return p.kind() == PatternKind::vertical_slash || (p.kind() == PatternKind::block_sparse && p.slash_unit() > 1);
}

std::vector<TileCost> block_costs_general(const HeadPattern& p, const std::vector<TokenSet>& q,
                                          const std::vector<TokenSet>& k, BlockShape s) {
  std::vector<std::vector<Piece>> segs, chunks;
  std::vector<std::vector<int64_t>> kv;  // verticals of each key set, ascending
  for (const auto& t : q) segs.push_back(cut_pieces(t, p.slash_unit(), s.bq));
  for (const auto& t : k) {
    chunks.push_back(cut_pieces(t, p.slash_unit(), s.bk));
    std::vector<int64_t> v;
    if (p.kind() == PatternKind::vertical_slash)
      for (int64_t x : t.tokens())
        if (p.verticals().contains(x)) v.push_back(x);
    std::sort(v.begin(), v.end());
    kv.push_back(std::move(v));
  }
  std::vector<TileCost> out;
  for (const auto& sg : segs)
    for (size_t b = 0; b < k.size(); ++b) out.push_back(general_pair(p, sg, chunks[b], kv[b], s.bk));
  return out;
}

std::vector<TileCost> block_costs(const HeadPattern& p, const std::vector<TokenSet>& q, const std::vector<TokenSet>& k,
                                  BlockShape s, GatherSweep sweep) {
  // The fast path's gather assumes diagonal 0 is selected (true whenever a
  // head keeps local diagonals); documents are not block-unit.
  const bool fast = p.kind() == PatternKind::block_sparse || p.slashes().contains(0);
  if (fast)
    if (const Layout* L = layout_for(q, k, p.slash_unit(), s)) return fast_costs(p, *L, q.size(), k.size(), s, sweep);
  return block_costs_general(p, q, k, s);
}

}  // namespace rm::sparsity
