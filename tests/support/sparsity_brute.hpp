// Test helpers: brute-force tile counting over a materialised mask, and
// random patterns and partitions, for the property tests of sim/sparsity.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "sim/sparsity/count.hpp"

namespace rm::sparsity::testing {

// The whole S x S mask, materialised once per pattern (small S only).
struct Mask {
  int64_t n = 0;
  std::vector<char> bits;
  HeadPattern pattern;  // block-unit kinds are counted by the kernel's plan rules
  Mask(const HeadPattern& p, int64_t s) : n(s), bits(static_cast<size_t>(s * s)), pattern(p) {
    for (int64_t q = 0; q < s; ++q)
      for (int64_t k = 0; k < (p.causal() ? q + 1 : s); ++k) bits[static_cast<size_t>(q * s + k)] = p.allowed(q, k);
  }
  bool at(int64_t q, int64_t k) const { return bits[static_cast<size_t>(q * n + k)] != 0; }
};

// The sparse kernel's plan (kernels/plan.cpp), row by row: segments of <= Bq
// local rows and chunks of <= Bk, each inside one u-block; a selected, visible
// (segment, chunk) is one tile; vertical-slash gathers the remaining verticals
// of the key rows, <= Bk per tile. nnz from the materialised mask.
inline TileCost brute_plan_count(const Mask& m, const TokenSet& qs, const TokenSet& ks, BlockShape s) {
  const HeadPattern& p = m.pattern;
  const int64_t u = p.slash_unit();
  auto selected = [&](int64_t qb, int64_t kb) {
    return p.slashes().contains(qb - kb) || (p.kind() == PatternKind::block_sparse && p.verticals().contains(kb * u));
  };
  struct Run { int64_t block, first, last; };
  auto cut = [&](const std::vector<int64_t>& t, int64_t limit) {
    std::vector<Run> runs;
    int64_t rows = 0;
    for (int64_t x : t) {
      if (runs.empty() || runs.back().block != x / u || rows == limit) runs.push_back({x / u, x, x}), rows = 0;
      runs.back().first = std::min(runs.back().first, x);
      runs.back().last = std::max(runs.back().last, x);
      ++rows;
    }
    return runs;
  };
  const auto q = qs.tokens(), k = ks.tokens();
  TileCost c;
  for (int64_t a : q)
    for (int64_t b : k) c.nnz += m.at(a, b);
  for (const Run& sg : cut(q, s.bq)) {
    for (const Run& ch : cut(k, s.bk)) c.blocks += selected(sg.block, ch.block) && ch.first <= sg.last;
    if (p.kind() != PatternKind::vertical_slash) continue;
    int64_t gathered = 0;
    for (int64_t b : k) gathered += p.verticals().contains(b) && b <= sg.last && !selected(sg.block, b / u);
    c.blocks += (gathered + s.bk - 1) / s.bk;
  }
  return c;
}

inline TileCost brute_count(const Mask& m, const TokenSet& qs, const TokenSet& ks, BlockShape s) {
  if (m.pattern.kind() == PatternKind::vertical_slash || (m.pattern.kind() == PatternKind::block_sparse && m.pattern.slash_unit() > 1))
    return brute_plan_count(m, qs, ks, s);
  const auto q = qs.tokens(), k = ks.tokens();
  TileCost c;
  for (size_t q0 = 0; q0 < q.size(); q0 += static_cast<size_t>(s.bq))
    for (size_t k0 = 0; k0 < k.size(); k0 += static_cast<size_t>(s.bk)) {
      int64_t n = 0;
      for (size_t a = q0; a < std::min(q.size(), q0 + static_cast<size_t>(s.bq)); ++a)
        for (size_t b = k0; b < std::min(k.size(), k0 + static_cast<size_t>(s.bk)); ++b) n += m.at(q[a], k[b]);
      if (n > 0) c += TileCost{1, n};
    }
  return c;
}

using Rng = std::mt19937_64;
inline int64_t uniform(Rng& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

// Random intervals inside [0, limit): singletons and runs.
inline IntervalSet random_intervals(Rng& rng, int64_t limit, int max_items) {
  std::vector<Interval> iv;
  for (int n = static_cast<int>(uniform(rng, 0, max_items)); n > 0; --n) {
    int64_t lo = uniform(rng, 0, limit - 1);
    iv.push_back({lo, std::min(limit, lo + (uniform(rng, 0, 2) == 0 ? uniform(rng, 1, limit / 8 + 1) : 1))});
  }
  return IntervalSet(iv);
}

inline HeadPattern random_pattern(Rng& rng, int64_t s) {
  switch (uniform(rng, 0, 5)) {
    case 0: return HeadPattern::dense_causal();
    case 1: return HeadPattern::sliding_window(uniform(rng, 1, s));
    case 2: return HeadPattern::a_shape(uniform(rng, 0, s / 4), uniform(rng, 1, s / 2));
    case 3: {
      int64_t u = uniform(rng, 2, 40);
      return HeadPattern::block_sparse(u, random_intervals(rng, s / u + 1, 4), random_intervals(rng, s / u + 1, 6));
    }
    case 4: {
      std::vector<int64_t> starts{0};
      for (int n = static_cast<int>(uniform(rng, 0, 8)); n > 0; --n) starts.push_back(uniform(rng, 1, s - 1));
      std::sort(starts.begin(), starts.end());
      return HeadPattern::document_causal(starts);
    }
    default:  // small slash blocks, so that a short sequence holds many
      return HeadPattern::vertical_slash(random_intervals(rng, s, 40), random_intervals(rng, s, 40), uniform(rng, 1, 24));
  }
}

// Document starts in [0, s): 0, then up to max_docs - 1 random cuts (duplicates merge).
inline std::vector<int64_t> random_doc_starts(Rng& rng, int64_t s, int max_docs) {
  std::vector<int64_t> starts{0};
  for (int n = static_cast<int>(uniform(rng, 0, max_docs - 1)); n > 0 && s > 1; --n) starts.push_back(uniform(rng, 1, s - 1));
  std::sort(starts.begin(), starts.end());
  return starts;
}

// A dense-family pattern: dense or documents, causal or full.
inline HeadPattern random_dense_family(Rng& rng, int64_t s) {
  switch (uniform(rng, 0, 3)) {
    case 0: return HeadPattern::dense_causal();
    case 1: return HeadPattern::dense_full();
    case 2: return HeadPattern::document_causal(random_doc_starts(rng, s, static_cast<int>(uniform(rng, 1, 12))));
    default: return HeadPattern::document_full(random_doc_starts(rng, s, static_cast<int>(uniform(rng, 1, 12))));
  }
}

// Partitions of [0, s) over w ranks.
inline std::vector<TokenSet> contiguous(int64_t s, int w) {
  std::vector<TokenSet> out;
  for (int r = 0; r < w; ++r) out.push_back({{{s * r / w, s * (r + 1) / w - s * r / w, 0, 1}}});
  return out;
}
inline std::vector<TokenSet> zigzag(int64_t s, int w) {
  std::vector<TokenSet> out;
  auto at = [&](int64_t c) { return s * c / (2 * w); };
  for (int r = 0; r < w; ++r)
    out.push_back({{{at(r), at(r + 1) - at(r), 0, 1}, {at(2 * w - 1 - r), at(2 * w - r) - at(2 * w - 1 - r), 0, 1}}});
  return out;
}
// Stripes of g tokens (s a multiple of w*g).
inline std::vector<TokenSet> stripe(int64_t s, int w, int64_t g) {
  std::vector<TokenSet> out;
  for (int r = 0; r < w; ++r) out.push_back({{{r * g, g, w * g, s / (w * g)}}});
  return out;
}
// Random pieces (multiples of unit) dealt to random ranks in random local order.
inline std::vector<TokenSet> random_runs(Rng& rng, int64_t s, int w, int64_t unit) {
  std::vector<TokenSet> out(static_cast<size_t>(w));
  for (int64_t t = 0; t < s;) {
    int64_t len = std::min(s - t, unit * uniform(rng, 1, 4));
    out[static_cast<size_t>(uniform(rng, 0, w - 1))].runs.push_back({t, len, 0, 1});
    t += len;
  }
  for (auto& ts : out) std::shuffle(ts.runs.begin(), ts.runs.end(), rng);
  return out;
}

}  // namespace rm::sparsity::testing
