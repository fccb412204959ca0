// Clock alignment across ranks: each rank times its ops on its own steady
// clock, and rank 0 estimates every peer's offset to its own from MPI
// ping-pongs, NTP style, with a bound on the error. The measured Timeline
// (measured_timeline.hpp) subtracts the offsets and records the bounds.
// Pure arithmetic on plain numbers: world.cpp does the MPI exchanges.
#pragma once

#include <span>

namespace rm::runtime {

// The clock every rank times its ops with: std::chrono::steady_clock, seconds.
double steady_now_s();

// Ping-pong rounds per peer at start-up: the estimate keeps the tightest
// rounds, and a few dozen give one whose delay is close to the minimum.
inline constexpr int kPingRounds = 32;

// One ping-pong sample seen from rank 0: t0 (rank 0 sends), t1 (peer
// receives, peer clock), t2 (peer replies, peer clock), t3 (rank 0 receives).
// offset = ((t1 - t0) + (t2 - t3)) / 2, delay = (t3 - t0) - (t2 - t1).
struct PingSample {
  double t0 = 0, t1 = 0, t2 = 0, t3 = 0;
};

// Peer clock minus rank-0 clock: a time t on the peer is t - offset_s on rank
// 0's clock, within uncertainty_s.
struct ClockOffset {
  double offset_s = 0;
  double uncertainty_s = 0;
  bool operator==(const ClockOffset&) const = default;
};

// Whatever the two one-way delays d1, d2 >= 0 are, a sample's offset is the
// true one plus (d1 - d2) / 2, so the truth lies within delay / 2 of it. The
// estimate is the midpoint of the intersection of those intervals over all
// samples (each contains the truth, so this never loosens the bound of the
// minimum-delay sample alone and tightens as samples are added); if the
// intervals do not meet (the clocks drifted between samples), the
// minimum-delay sample's own interval. Throws std::invalid_argument when
// `samples` is empty or a sample's times are not finite or not monotone
// (t0 <= t3 and t1 <= t2).
ClockOffset estimate_offset(std::span<const PingSample> samples);

}  // namespace rm::runtime
