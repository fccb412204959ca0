// The rate of an attention kernel at a call's size: its table's measured
// points (configs/kernels/), interpolated linearly in log(tokens) between
// points and clamped to the end points outside them. Measurements are taken
// at doubling sequence lengths, so log spacing makes each segment one doubling.
#pragma once

#include <algorithm>
#include <cmath>

#include "sim/config/attention_kernel.hpp"

namespace rm::cost {

inline double interpolate_tflops(const RateCurve& c, double tokens) {
  if (tokens <= c.front().tokens) return c.front().tflops;
  if (tokens >= c.back().tokens) return c.back().tflops;
  auto hi = std::upper_bound(c.begin(), c.end(), tokens, [](double t, const RatePoint& p) { return t < p.tokens; });
  auto lo = hi - 1;
  const double f = std::log(tokens / lo->tokens) / std::log(hi->tokens / lo->tokens);
  return lo->tflops + f * (hi->tflops - lo->tflops);
}

}  // namespace rm::cost
