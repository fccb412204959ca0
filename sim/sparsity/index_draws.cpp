#include "sim/sparsity/index_draws.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace rm::sparsity {

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  auto splitmix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return splitmix(splitmix(splitmix(splitmix(seed) ^ a) ^ b) ^ c);
}

Spread parse_spread(const std::string& name) {
  if (name == "uniform") return Spread::uniform;
  if (name == "log_uniform") return Spread::log_uniform;
  throw std::invalid_argument("expected \"uniform\" or \"log_uniform\", got \"" + name + "\"");
}

std::vector<int64_t> draw_distinct(Rng& rng, int64_t lo, int64_t hi, int64_t n, Spread spread) {
  const int64_t avail = std::max<int64_t>(0, hi - lo);
  n = std::min(n, avail);
  std::vector<int64_t> out;
  if (n <= 0) return out;
  if (n * 2 >= avail && spread == Spread::uniform) {  // dense draw: a shuffled prefix
    std::vector<int64_t> all(static_cast<size_t>(avail));
    std::iota(all.begin(), all.end(), lo);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<size_t>(n));
    return all;
  }
  // Repeats are rejected by a bitmap of [lo, hi), kept per thread and cleared
  // bit by bit afterwards: a hash set cost most of a pattern build.
  thread_local std::vector<uint64_t> seen;
  if (seen.size() < static_cast<size_t>(avail / 64 + 1)) seen.resize(static_cast<size_t>(avail / 64 + 1));
  auto insert = [&](int64_t x) {
    const auto i = static_cast<uint64_t>(x - lo);
    uint64_t& w = seen[i >> 6];
    const uint64_t bit = uint64_t(1) << (i & 63);
    if (w & bit) return false;
    w |= bit;
    return true;
  };
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double span = std::log(static_cast<double>(avail) + 1.0);
  // Rejection of repeats; log-uniform draws crowd near lo, so give up after
  // a bounded number of tries rather than loop forever.
  for (int64_t tries = 0; static_cast<int64_t>(out.size()) < n && tries < 30 * n + 1000; ++tries) {
    int64_t x = spread == Spread::uniform
                    ? lo + static_cast<int64_t>(u(rng) * static_cast<double>(avail))
                    : lo + static_cast<int64_t>(std::exp(u(rng) * span)) - 1;
    x = std::clamp(x, lo, hi - 1);
    if (insert(x)) out.push_back(x);
  }
  for (int64_t x : out) seen[static_cast<uint64_t>(x - lo) >> 6] = 0;
  return out;
}

}  // namespace rm::sparsity
