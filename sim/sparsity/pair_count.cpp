#include "sim/sparsity/pair_count.hpp"

#include <algorithm>

namespace rm::sparsity {

namespace {

int64_t arith(int64_t lo, int64_t hi) { return hi <= lo ? 0 : (lo + hi - 1) * (hi - lo) / 2; }  // lo + ... + hi-1

// sum over d in [x, y) of min(cap, base + d)
int64_t sum_min(int64_t cap, int64_t base, int64_t x, int64_t y) {
  int64_t m = std::clamp(cap - base, x, y);
  return base * (m - x) + arith(x, m) + cap * (y - m);
}

// sum over d in [x, y) of max(floor, base + d)
int64_t sum_max(int64_t floor, int64_t base, int64_t x, int64_t y) {
  int64_t m = std::clamp(floor - base, x, y);
  return floor * (m - x) + base * (y - m) + arith(m, y);
}

int64_t causal_pairs(Interval q, Interval k) { return offset_pairs(q, k, IntervalSet({{0, kUnbounded}})); }

// Pairs where k is a column and q - k is an offset (counted by both terms).
int64_t column_and_offset_pairs(Interval q, Interval k, const IntervalSet& columns, const IntervalSet& offsets) {
  int64_t n = 0;
  int64_t hi = std::min(k.hi, q.hi);
  for (size_t i = columns.first_ending_after(k.lo); i < columns.intervals().size(); ++i) {
    const Interval& c = columns.intervals()[i];
    if (c.lo >= hi) break;
    for (int64_t t = std::max(c.lo, k.lo); t < std::min(c.hi, hi); ++t) n += offsets.count_in(q.lo - t, q.hi - t);
  }
  return n;
}

// Token-unit slashes: the union of slash pairs and column pairs.
int64_t token_unit_pairs(const HeadPattern& p, Interval q, Interval k) {
  int64_t n = offset_pairs(q, k, p.slashes());
  if (p.verticals().empty()) return n;
  return n + column_pairs(q, k, p.verticals()) - column_and_offset_pairs(q, k, p.verticals(), p.slashes());
}

// Block-unit slashes: cut both ranges at block edges; each piece pair lies in
// one (query block, key block), which is either wholly a diagonal block or
// left to the columns.
int64_t block_unit_pairs(const HeadPattern& p, Interval q, Interval k) {
  const int64_t u = p.slash_unit();
  int64_t n = 0;
  for (int64_t qa = q.lo; qa < q.hi;) {
    int64_t qb_blk = qa / u, qb = std::min(q.hi, (qb_blk + 1) * u);
    for (int64_t kc = k.lo; kc < k.hi && kc < qb;) {
      int64_t kb_blk = kc / u, ke = std::min(k.hi, (kb_blk + 1) * u);
      Interval qp{qa, qb}, kp{kc, ke};
      if (p.slashes().contains(qb_blk - kb_blk))
        n += kb_blk < qb_blk ? qp.size() * kp.size() : causal_pairs(qp, kp);
      else
        n += column_pairs(qp, kp, p.verticals());
      kc = ke;
    }
    qa = qb;
  }
  return n;
}

int64_t one_document_pairs(const HeadPattern& p, Interval q, Interval k) {
  if (q.hi <= q.lo || k.hi <= k.lo || k.lo >= q.hi) return 0;
  return p.slash_unit() == 1 ? token_unit_pairs(p, q, k) : block_unit_pairs(p, q, k);
}

}  // namespace

int64_t offset_pairs(Interval q, Interval k, const IntervalSet& offsets) {
  if (q.hi <= q.lo || k.hi <= k.lo) return 0;
  // q - k ranges over [q.lo - k.hi + 1, q.hi - k.lo - 1]; for offset d the
  // overlap |q ∩ (k + d)| is min(q.hi, k.hi + d) - max(q.lo, k.lo + d) >= 1.
  const int64_t lo = std::max<int64_t>(0, q.lo - k.hi + 1), hi = q.hi - k.lo;
  int64_t n = 0;
  for (size_t i = offsets.first_ending_after(lo); i < offsets.intervals().size(); ++i) {
    const Interval& d = offsets.intervals()[i];
    if (d.lo >= hi) break;
    int64_t x = std::max(d.lo, lo), y = std::min(d.hi, hi);
    n += sum_min(q.hi, k.hi, x, y) - sum_max(q.lo, k.lo, x, y);
  }
  return n;
}

int64_t column_pairs(Interval q, Interval k, const IntervalSet& columns) {
  int64_t n = 0;
  int64_t hi = std::min(k.hi, q.hi);  // causal: a column after the last query is unseen
  for (size_t i = columns.first_ending_after(k.lo); i < columns.intervals().size(); ++i) {
    const Interval& c = columns.intervals()[i];
    if (c.lo >= hi) break;
    int64_t x = std::max(c.lo, k.lo), y = std::min(c.hi, hi);
    n += q.hi * (y - x) - sum_max(q.lo, 0, x, y);  // column t is seen by q in [max(q.lo, t), q.hi)
  }
  return n;
}

int64_t allowed_pairs(const HeadPattern& p, Interval q, Interval k) {
  const auto& docs = p.doc_starts();
  if (docs.empty()) return one_document_pairs(p, q, k);
  int64_t n = 0;
  size_t d = static_cast<size_t>(std::upper_bound(docs.begin(), docs.end(), q.lo) - docs.begin()) - 1;
  for (; d < docs.size() && docs[d] < q.hi; ++d) {
    int64_t s = docs[d], t = d + 1 < docs.size() ? docs[d + 1] : kUnbounded;
    n += one_document_pairs(p, {std::max(q.lo, s), std::min(q.hi, t)}, {std::max(k.lo, s), std::min(k.hi, t)});
  }
  return n;
}

}  // namespace rm::sparsity
