#include "sim/sparsity/dense_count.hpp"

#include <algorithm>
#include <stdexcept>

namespace rm::sparsity {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }  // b > 0
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }
int64_t arith(int64_t lo, int64_t hi) { return hi <= lo ? 0 : (lo + hi - 1) * (hi - lo) / 2; }  // lo + ... + hi-1

// Runs here are monotone: one piece, or pieces at stride >= len.
int64_t last_token(const TokenRun& r) { return r.begin + (r.count - 1) * r.stride + r.len - 1; }

// |r ∩ [0, x)|
int64_t run_below(const TokenRun& r, int64_t x) {
  if (x <= r.begin) return 0;
  if (r.count == 1) return std::min(r.len, x - r.begin);
  const int64_t n = (x - r.begin) / r.stride;
  if (n >= r.count) return r.tokens();
  return n * r.len + std::min(r.len, x - r.begin - n * r.stride);
}

// Σ_{k in r} max(0, x - k): full pieces are arithmetic series, one piece is partial.
int64_t ramp(const TokenRun& r, int64_t x) {
  if (x <= r.begin) return 0;
  const int64_t L = r.len, s = r.count == 1 ? L : r.stride, t = x - r.begin - L;
  const int64_t n = t < 0 ? 0 : std::min(r.count, t / s + 1);  // pieces wholly below x
  int64_t sum = n * L * (x - r.begin) - L * s * (n * (n - 1) / 2) - n * (L * (L - 1) / 2);
  if (n < r.count) {
    const int64_t m = x - (r.begin + n * s);  // tokens of the next piece below x (< L)
    if (m > 0) sum += m * (m + 1) / 2;
  }
  return sum;
}

// #{q in A, k in B : k <= q} for two runs of one stride: piece pair (i, j)
// sits at D = A.begin - B.begin + (i - j)·stride and holds all LA·LB pairs
// when D >= LB - 1, none when D <= -LA; only a few i - j lie in between.
int64_t pairs_le_same_stride(const TokenRun& A, const TokenRun& B) {
  const int64_t s = A.stride, LA = A.len, LB = B.len, cA = A.count, cB = B.count, e = A.begin - B.begin;
  auto partial = [&](int64_t D) {  // Σ_{x < LA} clamp(x + D + 1, 0, LB)
    const int64_t v = D + 1, lo = std::clamp<int64_t>(-v, 0, LA), hi = std::clamp<int64_t>(LB - v, lo, LA);
    return arith(v + lo, v + hi) + LB * (LA - hi);
  };
  auto with_diff = [&](int64_t d) { return std::max<int64_t>(0, std::min(cA, cB + d) - std::max<int64_t>(0, d)); };
  auto at_least = [&](int64_t t) {  // #{(i, j) : i - j >= t}
    const int64_t j0 = std::clamp<int64_t>(1 - t, 0, cB), j1 = std::clamp<int64_t>(cA - t, j0, cB);
    return cA * j0 + (cA - t) * (j1 - j0) - arith(j0, j1);
  };
  const int64_t full_from = ceil_div(LB - 1 - e, s), some_from = floor_div(-LA - e, s) + 1;
  int64_t n = LA * LB * at_least(full_from);
  for (int64_t d = std::max(some_from, 1 - cB); d < std::min(full_from, cA); ++d) n += with_diff(d) * partial(e + d * s);
  return n;
}

// #{q in A, k in B : k <= q}, by pieces of the run with fewer of them.
int64_t pairs_le(const TokenRun& A, const TokenRun& B) {
  if (last_token(A) < B.begin) return 0;
  if (A.begin >= last_token(B)) return A.tokens() * B.tokens();
  if (A.count > 1 && B.count > 1 && A.stride == B.stride) return pairs_le_same_stride(A, B);
  int64_t n = 0;
  if (A.count <= B.count) {
    for (int64_t i = 0; i < A.count; ++i) {  // queries [lo, lo + LA): Σ_k |{q >= k}|
      const int64_t lo = A.begin + i * A.stride;
      n += ramp(B, lo + A.len) - ramp(B, lo);
    }
  } else {
    for (int64_t j = 0; j < B.count; ++j) {  // keys [lo, lo + LB): Σ_k (|A| - |{q < k}|)
      const int64_t lo = B.begin + j * B.stride;
      n += B.len * A.tokens() - (ramp(A, lo + B.len - 1) - ramp(A, lo - 1));
    }
  }
  return n;
}

// Consecutive runs (in local order) whose tokens increase: the tokens of a
// global range are one range of local positions, local + [below(lo), below(hi)).
struct Chain {
  int64_t local = 0;  // local position of the first token
  std::vector<TokenRun> runs;
  std::vector<int64_t> before;  // tokens in runs[0 .. i)
  int64_t size = 0;
  int64_t last = -1;  // largest token

  void add(const TokenRun& r) {
    runs.push_back(r);
    before.push_back(size);
    size += r.tokens();
    last = last_token(r);
  }
  int64_t below(int64_t x) const {  // |chain ∩ [0, x)|
    const auto it = std::partition_point(runs.begin(), runs.end(), [&](const TokenRun& r) { return r.begin < x; });
    if (it == runs.begin()) return 0;
    const auto i = static_cast<size_t>(it - runs.begin()) - 1;
    return before[i] + run_below(runs[i], x);
  }
  int64_t token(int64_t p) const {  // the p-th token, 0 <= p < size
    const auto i = static_cast<size_t>(std::upper_bound(before.begin(), before.end(), p) - before.begin()) - 1;
    const TokenRun& r = runs[i];
    const int64_t off = p - before[i];
    return r.begin + off / r.len * r.stride + off % r.len;
  }
};

struct DenseSet {
  std::vector<Chain> chains;   // in local order
  std::vector<TokenRun> runs;  // every run, monotone
  int64_t size = 0;
  int64_t lo = 0, hi = -1;  // smallest and largest token
  int64_t below(int64_t x) const {
    int64_t n = 0;
    for (const auto& c : chains) n += c.below(x);
    return n;
  }
};

DenseSet dense_set(const TokenSet& t) {
  DenseSet s;
  auto add = [&](const TokenRun& r) {
    if (s.chains.empty() || r.begin <= s.chains.back().last) {
      s.chains.emplace_back();
      s.chains.back().local = s.size;
    }
    s.chains.back().add(r);
    s.runs.push_back(r);
    s.lo = s.size == 0 ? r.begin : std::min(s.lo, r.begin);
    s.hi = std::max(s.hi, last_token(r));
    s.size += r.tokens();
  };
  for (const auto& r : t.runs) {
    if (r.len <= 0 || r.count <= 0) continue;
    if (r.count == 1 || r.stride >= r.len) add(r);
    else  // pieces that overlap or go backward: each its own run
      for (int64_t c = 0; c < r.count; ++c) add({r.begin + c * r.stride, r.len, r.len, 1});
  }
  return s;
}

// Documents [start[d], end(d)); a pattern without documents is one document.
struct Docs {
  std::vector<int64_t> start;
  explicit Docs(const HeadPattern& p) : start(p.doc_starts().empty() ? std::vector<int64_t>{0} : p.doc_starts()) {}
  int64_t end(size_t d) const { return d + 1 < start.size() ? start[d + 1] : kUnbounded; }
  size_t of(int64_t t) const { return static_cast<size_t>(std::upper_bound(start.begin(), start.end(), t) - start.begin()) - 1; }
};

// A set's tokens in each document it meets (documents in order, none empty).
struct DocShare {
  size_t doc = 0;
  int64_t tokens = 0;
};
std::vector<DocShare> doc_shares(const DenseSet& s, const Docs& docs) {
  std::vector<DocShare> out;
  if (s.size == 0) return out;
  int64_t at = s.below(docs.start[docs.of(s.lo)]);
  for (size_t d = docs.of(s.lo), last = docs.of(s.hi); d <= last; ++d) {
    const int64_t next = s.below(docs.end(d));
    if (next > at) out.push_back({d, next - at});
    at = next;
  }
  return out;
}

// The query tiles of a set: per tile, the documents it meets with its largest
// token in each (entries of tile i: [first[i], first[i + 1])).
struct TileDoc {
  size_t doc = 0;
  int64_t last = 0;
};
struct QueryTiles {
  std::vector<TileDoc> entries;
  std::vector<size_t> first;
};

QueryTiles query_tiles(const DenseSet& s, const Docs& docs, int64_t bq) {
  QueryTiles out;
  const int64_t tiles = (s.size + bq - 1) / bq;
  size_t c = 0;
  for (int64_t i = 0; i < tiles; ++i) {
    out.first.push_back(out.entries.size());
    const int64_t lo = i * bq, hi = std::min(s.size, lo + bq);
    while (s.chains[c].local + s.chains[c].size <= lo) ++c;
    int pieces = 0;
    for (size_t x = c; x < s.chains.size() && s.chains[x].local < hi; ++x, ++pieces) {
      const Chain& ch = s.chains[x];
      const int64_t u = std::max(lo, ch.local) - ch.local, v = std::min(hi, ch.local + ch.size) - ch.local;
      const size_t d0 = docs.of(ch.token(u)), dl = docs.of(ch.token(v - 1));
      for (size_t d = d0; d <= dl; ++d) {  // documents between the stretch's ends may hold none of it
        const int64_t a = d == d0 ? u : std::max(u, ch.below(docs.start[d]));
        const int64_t b = d == dl ? v : std::min(v, ch.below(docs.end(d)));
        if (a < b) out.entries.push_back({d, ch.token(b - 1)});
      }
    }
    if (pieces > 1) {  // several stretches: one entry per document, its largest token
      auto b = out.entries.begin() + static_cast<std::ptrdiff_t>(out.first.back());
      std::sort(b, out.entries.end(), [](const TileDoc& x, const TileDoc& y) { return x.doc < y.doc || (x.doc == y.doc && x.last > y.last); });
      out.entries.erase(std::unique(b, out.entries.end(), [](const TileDoc& x, const TileDoc& y) { return x.doc == y.doc; }),
                        out.entries.end());
    }
  }
  out.first.push_back(out.entries.size());
  return out;
}

// Key tiles (of bk local positions) a query tile computes: per document entry
// and key stretch, the tiles holding keys in [start, last] (causal) or the
// whole document (full); the union's size.
int64_t key_tiles(const TileDoc* e, const TileDoc* e_end, const DenseSet& k, const Docs& docs, int64_t bk, bool causal,
                  std::vector<Interval>& scratch) {
  scratch.clear();
  for (; e != e_end; ++e) {
    const int64_t lo_t = docs.start[e->doc], hi_t = causal ? e->last + 1 : docs.end(e->doc);
    for (const Chain& ch : k.chains) {
      const int64_t lo = ch.below(lo_t), hi = ch.below(hi_t);
      if (lo < hi) scratch.push_back({(ch.local + lo) / bk, (ch.local + hi - 1) / bk + 1});
    }
  }
  if (k.chains.size() > 1) std::sort(scratch.begin(), scratch.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  int64_t n = 0, cur_lo = 0, cur_hi = 0;  // one stretch: intervals come sorted by lo already
  for (const Interval& iv : scratch) {
    if (iv.lo > cur_hi) {
      n += cur_hi - cur_lo;
      cur_lo = iv.lo;
    }
    cur_hi = std::max(cur_hi, iv.hi);
  }
  return n + cur_hi - cur_lo;
}

// One query set's summary, counted against any key set.
struct QuerySide {
  DenseSet set;
  std::vector<DocShare> shares;
  QueryTiles tiles;
  QuerySide(const TokenSet& t, const Docs& docs, int64_t bq) : set(dense_set(t)), shares(doc_shares(set, docs)), tiles(query_tiles(set, docs, bq)) {}
};

TileCost cost(const HeadPattern& p, const Docs& docs, const QuerySide& q, const DenseSet& k, BlockShape shape,
              std::vector<Interval>& scratch) {
  TileCost c;
  if (q.set.size == 0 || k.size == 0) return c;
  if (p.causal()) {
    for (const auto& a : q.set.runs)
      for (const auto& b : k.runs) c.nnz += pairs_le(a, b);
    for (const auto& sh : q.shares)
      if (sh.doc > 0) c.nnz -= sh.tokens * k.below(docs.start[sh.doc]);
  } else {
    for (const auto& sh : q.shares) c.nnz += sh.tokens * (k.below(docs.end(sh.doc)) - k.below(docs.start[sh.doc]));
  }
  if (c.nnz == 0) return c;
  const auto& t = q.tiles;
  for (size_t i = 0; i + 1 < t.first.size(); ++i)
    c.blocks += key_tiles(t.entries.data() + t.first[i], t.entries.data() + t.first[i + 1], k, docs, shape.bk, p.causal(), scratch);
  return c;
}

void check(const HeadPattern& p) {
  if (!p.dense_family()) throw std::invalid_argument("dense_count: " + to_string(p.kind()) + " is not a dense-family pattern");
}

}  // namespace

TileCost dense_count(const HeadPattern& p, const TokenSet& q, const TokenSet& k, BlockShape shape) {
  check(p);
  const Docs docs(p);
  std::vector<Interval> scratch;
  return cost(p, docs, QuerySide(q, docs, shape.bq), dense_set(k), shape, scratch);
}

std::vector<TileCost> dense_pair_costs(const HeadPattern& p, const std::vector<TokenSet>& ranks, BlockShape shape) {
  check(p);
  const Docs docs(p);
  std::vector<DenseSet> keys;
  for (const auto& r : ranks) keys.push_back(dense_set(r));
  std::vector<TileCost> out;
  out.reserve(ranks.size() * ranks.size());
  std::vector<Interval> scratch;
  for (const auto& r : ranks) {
    const QuerySide q(r, docs, shape.bq);
    for (const auto& k : keys) out.push_back(cost(p, docs, q, k, shape, scratch));
  }
  return out;
}

std::vector<TileCost> dense_chunk_row_costs(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape shape) {
  check(p);
  const Docs docs(p);
  const DenseSet all = dense_set(TokenSet{{{0, seq_len, 0, 1}}});
  std::vector<TileCost> out;
  std::vector<Interval> scratch;
  for (int64_t c0 = 0; c0 < seq_len; c0 += chunk_tokens) {
    const QuerySide q(TokenSet{{{c0, std::min(chunk_tokens, seq_len - c0), 0, 1}}}, docs, shape.bq);
    out.push_back(cost(p, docs, q, all, shape, scratch));
  }
  return out;
}

}  // namespace rm::sparsity
