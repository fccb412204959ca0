#include "runtime/clock_sync.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace rm::runtime {

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ClockOffset estimate_offset(std::span<const PingSample> samples) {
  if (samples.empty()) throw std::invalid_argument("clock offset: no ping-pong samples");
  double lo = -INFINITY, hi = INFINITY;  // intersection of the samples' intervals
  size_t best = 0;
  double best_delay = INFINITY;
  for (size_t i = 0; i < samples.size(); ++i) {
    const PingSample& p = samples[i];
    if (!std::isfinite(p.t0) || !std::isfinite(p.t1) || !std::isfinite(p.t2) || !std::isfinite(p.t3) ||
        p.t3 < p.t0 || p.t2 < p.t1 || (p.t3 - p.t0) < (p.t2 - p.t1))
      throw std::invalid_argument(fmt::format(
          "clock offset: ping-pong sample {} is not monotone (expected t0 <= t3, t1 <= t2 and the peer's hold t2 - t1 "
          "within the round trip t3 - t0), got t0 {} t1 {} t2 {} t3 {}",
          i, p.t0, p.t1, p.t2, p.t3));
    const double offset = ((p.t1 - p.t0) + (p.t2 - p.t3)) / 2;
    const double half = ((p.t3 - p.t0) - (p.t2 - p.t1)) / 2;
    lo = std::max(lo, offset - half);
    hi = std::min(hi, offset + half);
    if (half < best_delay) best_delay = half, best = i;
  }
  if (lo <= hi) return {lo + (hi - lo) / 2, (hi - lo) / 2};
  const PingSample& p = samples[best];
  return {((p.t1 - p.t0) + (p.t2 - p.t3)) / 2, best_delay};
}

}  // namespace rm::runtime
