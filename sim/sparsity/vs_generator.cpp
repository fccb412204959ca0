#include "sim/sparsity/vs_generator.hpp"

#include <algorithm>
#include <cmath>

#include "sim/sparsity/aligned_count.hpp"
#include "sim/sparsity/count.hpp"

namespace rm::sparsity {

namespace {

constexpr BlockShape kReportShape{128, 64};  // MTraining's kernel tile

// Draws sorted by value, remembering their draw order: the first n draws are
// then picked in one pass, already sorted.
struct Ranked {
  std::vector<std::pair<int64_t, size_t>> by_value;  // (value, draw index)
  explicit Ranked(const std::vector<int64_t>& draws) {
    for (size_t i = 0; i < draws.size(); ++i) by_value.emplace_back(draws[i], i);
    std::sort(by_value.begin(), by_value.end());
  }
  size_t size() const { return by_value.size(); }
  void add_first(size_t n, std::vector<Interval>& out) const {
    for (const auto& [v, i] : by_value)
      if (i < n) out.push_back({v, v + 1});
  }
};

// Sinks and local diagonals first: the draws lie above them, so intervals stay sorted.
HeadPattern assemble(const VsShape& s, const Ranked& v, size_t nv, const Ranked& d, size_t nd) {
  std::vector<Interval> cols{{0, std::min(s.sink_tokens, s.seq_len)}}, diags{{0, std::min(s.local_diagonals, s.seq_len)}};
  v.add_first(nv, cols);
  d.add_first(nd, diags);
  return HeadPattern::vertical_slash(IntervalSet(std::move(cols)), IntervalSet(std::move(diags)));
}

int64_t causal_blocks(int64_t n_tokens) { return aligned_total_blocks(HeadPattern::dense_causal(), n_tokens, kReportShape); }

}  // namespace

HeadPattern budget_head(Rng& rng, const VsShape& s, int64_t verticals, int64_t slashes) {
  const Ranked v(draw_distinct(rng, s.sink_tokens, s.seq_len, verticals - s.sink_tokens, s.vertical_spread));
  const Ranked d(draw_distinct(rng, s.local_diagonals, s.seq_len, slashes - s.local_diagonals, s.slash_spread));
  return assemble(s, v, v.size(), d, d.size());
}

HeadPattern density_head(Rng& rng, const VsShape& s, double target_density, double vertical_share, int64_t max_verticals,
                         int64_t max_slashes) {
  const Ranked v(draw_distinct(rng, s.sink_tokens, s.seq_len, max_verticals - s.sink_tokens, s.vertical_spread));
  const Ranked d(draw_distinct(rng, s.local_diagonals, s.seq_len, max_slashes - s.local_diagonals, s.slash_spread));
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
  auto density = [&](int64_t n) {
    auto [nv, nd] = split(n);
    return static_cast<double>(chunk_row_costs(assemble(s, v, nv, d, nd), n_tokens, n_tokens, kReportShape)[0].blocks) / causal;
  };
  int64_t lo = 0, hi = static_cast<int64_t>(v.size() + d.size()) * 2 + 2;
  if (density(lo) >= target_density) hi = lo;
  while (lo < hi) {  // smallest n reaching the target (hi if none does)
    int64_t mid = lo + (hi - lo) / 2;
    if (density(mid) >= target_density) hi = mid;
    else lo = mid + 1;
  }
  auto [nv, nd] = split(hi);
  return assemble(s, v, nv, d, nd);
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
