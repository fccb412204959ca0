// Calibration inputs: a measured Timeline must belong to its Schedule (hash,
// every op once on its rank), the held-out split is deterministic and sized
// as asked, and the measured step is read from the iterations' median.
#include <gtest/gtest.h>

#include <set>

#include "sim/calibrate/runs.hpp"
#include "sim/config/json_reader.hpp"
#include "tests/sim/calibrate_support.hpp"

namespace rm::calibrate {
namespace {

std::string error_of(const Run& r) {
  try {
    check_run(r);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

Run good_run() {
  const CostParams p = synth::params_of(synth::experiment("runtime-tiny-ring", {}));
  Run r = synth::synthetic_run("runtime-tiny-ring", {"workload.seq_len=2k"}, p);
  r.name = "m.json";
  return r;
}

TEST(CalibrateRuns, AMatchingRunPasses) { EXPECT_EQ(error_of(good_run()), ""); }

TEST(CalibrateRuns, HashMismatchIsNamed) {
  calibrate::Run r = good_run();
  r.measured.metadata["schedule_hash"] = "0123456789abcdef";
  const std::string e = error_of(r);
  EXPECT_NE(e.find("m.json: metadata.schedule_hash is 0123456789abcdef"), std::string::npos) << e;
  r.measured.metadata.erase("schedule_hash");
  EXPECT_NE(error_of(r).find("m.json: no metadata.schedule_hash"), std::string::npos) << error_of(r);
}

TEST(CalibrateRuns, MissingDuplicatedOrMisplacedOpsAreNamed) {
  calibrate::Run r = good_run();
  r.measured.events.erase(r.measured.events.begin() + 3);
  EXPECT_NE(error_of(r).find("has no event"), std::string::npos) << error_of(r);
  r = good_run();
  r.measured.events.push_back(r.measured.events.front());
  EXPECT_NE(error_of(r).find("both carry op"), std::string::npos) << error_of(r);
  r = good_run();
  r.measured.events.front().rank = 1 - r.measured.events.front().rank;
  EXPECT_NE(error_of(r).find("m.json: event 0 is op"), std::string::npos) << error_of(r);
  r = good_run();
  r.measured.events.front().op = 1 << 20;
  EXPECT_NE(error_of(r).find("but its Schedule has"), std::string::npos) << error_of(r);
}

TEST(CalibrateRuns, HoldoutSplitIsDeterministicAndSized) {
  for (size_t n : {2u, 3u, 10u, 37u})
    for (double f : {0.1, 0.5, 0.9}) {
      const auto a = holdout_indices(n, f, 7);
      EXPECT_EQ(a, holdout_indices(n, f, 7));
      EXPECT_GE(a.size(), 1u);
      EXPECT_LE(a.size(), n - 1);
      EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
      EXPECT_EQ(std::set<size_t>(a.begin(), a.end()).size(), a.size());
      for (size_t i : a) EXPECT_LT(i, n);
    }
  EXPECT_EQ(holdout_indices(10, 0.5, 1).size(), 5u);
  EXPECT_NE(holdout_indices(37, 0.5, 1), holdout_indices(37, 0.5, 2));
  EXPECT_TRUE(holdout_indices(10, 0, 1).empty());
  EXPECT_TRUE(holdout_indices(1, 0.5, 1).empty());
  EXPECT_THROW(holdout_indices(10, 1.0, 1), std::invalid_argument);
  // Fixed for all platforms: mt19937_64 and a plain modulo.
  EXPECT_EQ(holdout_indices(10, 0.5, 1), holdout_indices(10, 0.5, 1));
}

TEST(CalibrateRuns, MeasuredStepIsTheIterationsMedian) {
  traces::Timeline t;
  traces::Event e;
  e.op = 0;
  e.start_s = 1;
  e.end_s = 4;
  t.events.push_back(e);
  EXPECT_EQ(measured_step_s(t), 3);
  t.metadata["iteration_s"] = {{"median", 2.5}, {"min", 2}, {"max", 3}};
  EXPECT_EQ(measured_step_s(t), 2.5);
}

}  // namespace
}  // namespace rm::calibrate
