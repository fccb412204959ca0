#include "sim/sparsity/document_lengths.hpp"

#include <cmath>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "sim/sparsity/index_draws.hpp"
#include "sim/sparsity/interval_set.hpp"

namespace rm::sparsity {

namespace {

// Documents of next() tokens each, until the sequence is full.
std::vector<int64_t> fill(int64_t seq_len, const std::function<int64_t()>& next) {
  std::vector<int64_t> starts{0};
  for (int64_t t = 0;;) {
    t += next();
    if (t >= seq_len) break;
    starts.push_back(t);
  }
  return starts;
}

}  // namespace

std::vector<int64_t> document_starts(const JsonReader& r, int64_t seq_len, uint64_t seed) {
  const std::string kind = r.one_of("distribution", {"list", "uniform", "histogram", "fractions"});
  Rng rng(mix_seed(seed, 0xd0c, 0, 0));
  std::vector<int64_t> starts;
  if (kind == "list") {
    const nlohmann::json& v = r.value("lengths");
    if (!v.is_array() || v.empty()) r.fail("lengths", "expected a non-empty array of token counts");
    std::vector<int64_t> lengths;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string where = r.where(fmt::format("lengths[{}]", i));
      lengths.push_back(parse_size(v[i], where));
      if (lengths.back() < 1) throw ConfigError(fmt::format("{}: expected a size >= 1, got {}", where, lengths.back()));
    }
    size_t i = 0;
    starts = fill(seq_len, [&] { return lengths[i++ % lengths.size()]; });
  } else if (kind == "uniform") {
    const int64_t lo = r.size("min_tokens", 1, kUnbounded), hi = r.size("max_tokens", lo, kUnbounded);
    starts = fill(seq_len, [&] { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); });
  } else if (kind == "histogram") {
    std::vector<std::pair<int64_t, int64_t>> bins;
    std::vector<double> weights;
    for (const auto& b : r.objects("bins")) {
      const int64_t lo = b.size("min_tokens", 1, kUnbounded);
      bins.emplace_back(lo, b.size("max_tokens", lo, kUnbounded));
      weights.push_back(b.number("weight", 0.0, 1e12));
      b.finish();
    }
    double total = 0;
    for (double w : weights) total += w;
    if (bins.empty() || !(total > 0)) r.fail("bins", "expected at least one bin with a positive weight");
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    starts = fill(seq_len, [&] {
      const auto& [lo, hi] = bins[pick(rng)];
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    });
  } else {  // fractions of the sequence; max_fraction caps every document
    const double hi_f = r.number("max_fraction", 0.0, 1.0);
    const double lo_f = r.number_or("min_fraction", 0.0, hi_f, 0.0);
    const auto lo = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(lo_f * double(seq_len))));
    const auto hi = static_cast<int64_t>(std::floor(hi_f * double(seq_len)));
    if (hi < lo)
      r.fail("max_fraction", fmt::format("{} of {} tokens is below one document of {} token(s)", hi_f, seq_len, lo));
    starts = fill(seq_len, [&] { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); });
  }
  r.finish();
  return starts;
}

}  // namespace rm::sparsity
