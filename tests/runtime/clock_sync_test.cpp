// Clock offsets from ping-pongs: on synthetic clocks with a known offset and
// random asymmetric one-way delays, the estimate lies within its stated
// uncertainty of the truth in every case, the uncertainty never grows as
// samples are added, and bad samples are refused.
#include "runtime/clock_sync.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace rm::runtime {
namespace {

// A peer whose clock reads the rank-0 clock + theta; delays drawn per sample,
// the two directions from different ranges (asymmetric routes and wake-ups).
struct SyntheticPeer {
  double theta;
  std::mt19937_64 rng;
  double now = 0;  // rank-0 clock

  PingSample ping() {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    now += 1e-4 + 1e-3 * u(rng);
    const double d1 = 2e-7 + 4e-5 * u(rng) * u(rng);  // out: mostly short, sometimes long
    const double d2 = 5e-7 + 2e-4 * u(rng);           // back: wider
    const double hold = 1e-6 * u(rng);                // the peer's time between receive and reply
    PingSample p;
    p.t0 = now;
    p.t1 = now + d1 + theta;
    p.t2 = p.t1 + hold;
    p.t3 = now + d1 + hold + d2;
    now = p.t3;
    return p;
  }
};

// Rounding of clock readings near 1e3 s: a few ulps.
constexpr double kSlack = 1e-12;

TEST(ClockSync, OneSampleIsTheNtpFormula) {
  const PingSample p{10.0, 13.5, 13.75, 10.5};  // round trip 0.5, hold 0.25
  const ClockOffset c = estimate_offset(std::vector{p});
  EXPECT_DOUBLE_EQ(c.offset_s, ((13.5 - 10.0) + (13.75 - 10.5)) / 2);
  EXPECT_DOUBLE_EQ(c.uncertainty_s, ((10.5 - 10.0) - (13.75 - 13.5)) / 2);
}

TEST(ClockSync, EstimateIsWithinItsUncertaintyOfTheTruthInEveryRandomCase) {
  std::mt19937_64 seeds(11);
  for (int c = 0; c < 2000; ++c) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    SyntheticPeer peer{-5.0 + 10.0 * u(seeds), std::mt19937_64(seeds()), 100.0 + 900.0 * u(seeds)};
    const int count = 1 + static_cast<int>(seeds() % 64);
    std::vector<PingSample> samples;
    for (int i = 0; i < count; ++i) samples.push_back(peer.ping());
    const ClockOffset est = estimate_offset(samples);
    ASSERT_LE(std::fabs(est.offset_s - peer.theta), est.uncertainty_s + kSlack)
        << "case " << c << ", " << count << " samples: estimate " << est.offset_s << " truth " << peer.theta;
    ASSERT_GE(est.uncertainty_s, 0.0);
  }
}

TEST(ClockSync, UncertaintyNeverGrowsAndShrinksWithMoreSamples) {
  double first_total = 0, last_total = 0;
  for (unsigned seed = 0; seed < 50; ++seed) {
    SyntheticPeer peer{0.25, std::mt19937_64(seed), 500.0};
    std::vector<PingSample> samples;
    double previous = std::numeric_limits<double>::infinity();
    for (int k = 1; k <= kPingRounds; ++k) {
      samples.push_back(peer.ping());
      const double u = estimate_offset(samples).uncertainty_s;
      EXPECT_LE(u, previous + kSlack) << "seed " << seed << ", " << k << " samples";
      previous = u;
      if (k == 1) first_total += u;
    }
    last_total += previous;
  }
  // Over many peers, kPingRounds samples bound the offset far tighter than one.
  EXPECT_LT(last_total, first_total / 4) << first_total << " vs " << last_total;
}

TEST(ClockSync, DisjointIntervalsFallBackToTheMinimumDelaySample) {
  // Offsets 1.0 +- 0.1 and 2.0 +- 0.05: no common point (a clock jumped);
  // the tighter sample alone is kept.
  const std::vector<PingSample> samples = {{0.0, 1.1, 1.1, 0.2}, {10.0, 12.05, 12.05, 10.1}};
  const ClockOffset c = estimate_offset(samples);
  EXPECT_NEAR(c.offset_s, 2.0, 1e-12);
  EXPECT_NEAR(c.uncertainty_s, 0.05, 1e-12);
}

TEST(ClockSync, RefusesEmptyOrNonMonotoneSamples) {
  EXPECT_THROW(estimate_offset(std::vector<PingSample>{}), std::invalid_argument);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const PingSample& bad : {PingSample{1.0, 5.0, 5.1, 0.9},      // t3 < t0
                                PingSample{1.0, 5.1, 5.0, 2.0},      // t2 < t1
                                PingSample{1.0, 5.0, 7.0, 2.0},      // peer held longer than the round trip
                                PingSample{1.0, nan, 5.0, 2.0}}) {
    try {
      estimate_offset(std::vector{PingSample{0.0, 0.0, 0.0, 0.0}, bad});
      ADD_FAILURE() << "no error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sample 1 is not monotone"), std::string::npos) << e.what();
    }
  }
}

TEST(ClockSync, SteadyClockDoesNotGoBack) {
  double last = steady_now_s();
  for (int i = 0; i < 1000; ++i) {
    const double t = steady_now_s();
    ASSERT_GE(t, last);
    last = t;
  }
}

}  // namespace
}  // namespace rm::runtime
