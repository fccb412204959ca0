#include "sim/sparsity/vs_generator.hpp"

#include <algorithm>
#include <cmath>

#include "sim/sparsity/aligned_count.hpp"
#include "sim/sparsity/count.hpp"
#include "sim/sparsity/prefix_blocks.hpp"

namespace rm::sparsity {

namespace {

constexpr BlockShape kReportShape{128, 64};  // MTraining's kernel tile

// Sinks and local diagonals first: the draws lie above them, so intervals stay
// sorted. Only the first nv / nd draws are sorted: the search never assembles
// a head, so the final one is the only one built (besides the reference path).
HeadPattern assemble(const VsShape& s, const std::vector<int64_t>& v, size_t nv, const std::vector<int64_t>& d, size_t nd) {
  auto points = [](std::vector<Interval>& out, const std::vector<int64_t>& draws, size_t n) {
    std::vector<int64_t> first(draws.begin(), draws.begin() + static_cast<std::ptrdiff_t>(std::min(n, draws.size())));
    std::sort(first.begin(), first.end());
    for (int64_t x : first) out.push_back({x, x + 1});
  };
  std::vector<Interval> cols{{0, std::min(s.sink_tokens, s.seq_len)}}, diags{{0, std::min(s.local_diagonals, s.seq_len)}};
  points(cols, v, nv);
  points(diags, d, nd);
  return HeadPattern::vertical_slash(IntervalSet(std::move(cols)), IntervalSet(std::move(diags)));
}

// Every head of a model asks for the same length: keep the last answer.
int64_t causal_blocks(int64_t n_tokens) {
  thread_local int64_t last_n = -1, last_blocks = 0;
  if (n_tokens != last_n) last_blocks = aligned_total_blocks(HeadPattern::dense_causal(), n_tokens, kReportShape), last_n = n_tokens;
  return last_blocks;
}

}  // namespace

HeadPattern budget_head(Rng& rng, const VsShape& s, int64_t verticals, int64_t slashes) {
  const auto v = draw_distinct(rng, s.sink_tokens, s.seq_len, verticals - s.sink_tokens, s.vertical_spread);
  const auto d = draw_distinct(rng, s.local_diagonals, s.seq_len, slashes - s.local_diagonals, s.slash_spread);
  return assemble(s, v, v.size(), d, d.size());
}

namespace {

// The smallest n in [0, hi) with reaches(n), or hi when none does, for a
// reaches() that is monotone in n (a head's density only grows with its
// prefix). `gallop` probes 0, 1, 2, 4, ... first, so every probe stays below
// twice the answer: the prefix count (PrefixBlocks) then moves little between
// probes. Plain bisection gives the same n for any monotone predicate.
template <class F>
int64_t smallest_reaching(int64_t hi, bool gallop, F reaches) {
  int64_t lo = 0;
  if (reaches(lo)) return lo;
  if (gallop) {
    int64_t g = 1;
    while (g < hi && !reaches(g)) lo = g, g *= 2;
    lo = std::min(lo + 1, hi);
    hi = std::min(g, hi);  // reaches(hi) is known (or hi is the "none" answer)
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (reaches(mid)) hi = mid;
    else lo = mid + 1;
  }
  return hi;
}

HeadPattern calibrated_head(Rng& rng, const VsShape& s, double target_density, double vertical_share,
                            int64_t max_verticals, int64_t max_slashes, bool incremental) {
  const std::vector<int64_t> v = draw_distinct(rng, s.sink_tokens, s.seq_len, max_verticals - s.sink_tokens, s.vertical_spread);
  const std::vector<int64_t> d = draw_distinct(rng, s.local_diagonals, s.seq_len, max_slashes - s.local_diagonals, s.slash_spread);
  const int64_t n_tokens = s.seq_len / kReportShape.bq * kReportShape.bq;
  if (n_tokens == 0) return assemble(s, v, 0, d, 0);
  const double causal = static_cast<double>(causal_blocks(n_tokens));
  // n extra indices: round(n * share) columns and the rest diagonals, each
  // capped; density grows with n because every step adds to a prefix.
  auto split = [&](int64_t n) {
    return std::pair<size_t, size_t>{
        static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(v.size()), std::llround(static_cast<double>(n) * vertical_share))),
        static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(d.size()), std::llround(static_cast<double>(n) * (1 - vertical_share))))};
  };
  const int64_t sinks = std::min(s.sink_tokens, s.seq_len), local = std::min(s.local_diagonals, s.seq_len);
  const int64_t hi = static_cast<int64_t>(v.size() + d.size()) * 2 + 2;
  int64_t n = 0;
  if (incremental && PrefixBlocks::supported(n_tokens, kSlashBlock, local, kReportShape)) {
    // The fewest tiles whose density reaches the target, by the same double
    // comparison the plain path makes (monotone in the tile count).
    auto dense_enough = [&](int64_t tiles) { return static_cast<double>(tiles) / causal >= target_density; };
    int64_t min_tiles = std::max<int64_t>(0, static_cast<int64_t>(std::min(std::ceil(target_density * causal), 4.0 * causal + 4)));
    while (min_tiles > 0 && dense_enough(min_tiles - 1)) --min_tiles;
    for (int step = 0; !dense_enough(min_tiles); ++step, ++min_tiles)
      if (step == 64) {  // a target no count reaches (density above 4)
        min_tiles = kUnbounded;
        break;
      }
    PrefixBlocks count(n_tokens, kSlashBlock, kReportShape, sinks, local, v, d);
    n = smallest_reaching(hi, true, [&](int64_t m) {
      auto [nv, nd] = split(m);
      return count.reaches(nv, nd, min_tiles);
    });
  } else {
    n = smallest_reaching(hi, incremental, [&](int64_t m) {
      auto [nv, nd] = split(m);
      return static_cast<double>(chunk_row_costs(assemble(s, v, nv, d, nd), n_tokens, n_tokens, kReportShape)[0].blocks) /
                 causal >=
             target_density;
    });
  }
  auto [nv, nd] = split(n);
  return assemble(s, v, nv, d, nd);
}

}  // namespace

HeadPattern density_head(Rng& rng, const VsShape& s, double target_density, double vertical_share, int64_t max_verticals,
                         int64_t max_slashes) {
  return calibrated_head(rng, s, target_density, vertical_share, max_verticals, max_slashes, true);
}

HeadPattern density_head_reference(Rng& rng, const VsShape& s, double target_density, double vertical_share,
                                   int64_t max_verticals, int64_t max_slashes) {
  return calibrated_head(rng, s, target_density, vertical_share, max_verticals, max_slashes, false);
}

std::vector<double> layer_sparsity_profile(int layers, double min, double max, double mean, uint64_t seed) {
  if (layers <= 1 || max <= min) return std::vector<double>(static_cast<size_t>(std::max(layers, 0)), mean);
  // sparsity = max - (max - min) * x^g over x evenly in [0, 1]; g is chosen so
  // the mean comes out right (the mean of x^g falls as g grows).
  const double want = std::clamp((max - mean) / (max - min), 1e-6, 1.0 - 1e-6);
  auto mean_pow = [&](double g) {
    double m = 0;
    for (int l = 0; l < layers; ++l) m += std::pow(static_cast<double>(l) / (layers - 1), g);
    return m / layers;
  };
  double glo = 1e-3, ghi = 1e3;
  for (int it = 0; it < 200; ++it) {
    double g = std::sqrt(glo * ghi);
    (mean_pow(g) > want ? glo : ghi) = g;
  }
  const double g = std::sqrt(glo * ghi);
  std::vector<double> out;
  for (int l = 0; l < layers; ++l) out.push_back(max - (max - min) * std::pow(static_cast<double>(l) / (layers - 1), g));
  Rng rng(mix_seed(seed, 0x1a7e5, 0, 0));
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

}  // namespace rm::sparsity
