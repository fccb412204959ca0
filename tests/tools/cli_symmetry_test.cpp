// `ringmaster simulate --symmetry dp` (docs/engines.md, "Replica symmetry"): the
// shortcut's line and JSON field, the same step time as the full step, the line
// saying why where it does not apply, its one-line refusals (exit code 2), and
// the same on the SimGrid engine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

const std::string kStep = " --set parallel.dp=2 --set parallel.cp=4 --set workload.seq_len=16k --set model.layers=2";

TEST(CliSymmetry, OneReplicaGivesTheFullStepsTime) {
  auto full = run_cli("simulate --json" + kStep);
  auto one = run_cli("simulate --json --symmetry dp" + kStep);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto jf = nlohmann::json::parse(full.out), j1 = nlohmann::json::parse(one.out);
  EXPECT_EQ(jf["step_time_s"].get<double>(), j1["step_time_s"].get<double>());
  EXPECT_EQ(jf["gpus"], j1["gpus"]);
  EXPECT_EQ(jf["ops"].get<int64_t>(), 2 * j1["ops"].get<int64_t>());
  EXPECT_FALSE(jf.contains("symmetry"));
  EXPECT_EQ(j1["symmetry"]["replicas_simulated"], 1);
  EXPECT_EQ(j1["symmetry"]["replicas"], 2);
  auto text = run_cli("simulate --symmetry dp" + kStep);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("symmetry: simulated 1 of 2 data-parallel replicas"));
}

TEST(CliSymmetry, SaysWhyWhereItDoesNotApply) {
  auto r = run_cli("simulate --symmetry dp --set parallel.cp=4 --set workload.seq_len=16k --set scope=attention_fwd");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("symmetry: the full step: the data-parallel shortcut does not apply: dp = 1"));
}

TEST(CliSymmetry, RefusesWhatItCannotRun) {
  auto bad = run_cli("simulate --symmetry yes" + kStep);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--symmetry: expected off or dp"));
  auto file = run_cli("simulate --symmetry dp --schedule x.json.gz");
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_THAT(file.err, HasSubstr("a Schedule file holds every replica"));
}

TEST(CliSymmetry, SimGridRunsOneReplicaForAll) {
  // The same step time as SimGrid's full step, to the bit (tests/sim/symmetry_simgrid_test.cpp).
  auto full = run_cli("simulate --json --engine simgrid" + kStep);
  auto one = run_cli("simulate --json --engine simgrid --symmetry dp" + kStep);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto jf = nlohmann::json::parse(full.out), j1 = nlohmann::json::parse(one.out);
  EXPECT_EQ(jf["step_time_s"].get<double>(), j1["step_time_s"].get<double>());
  EXPECT_EQ(j1["symmetry"]["replicas_simulated"], 1);
  EXPECT_EQ(j1["engine"], "simgrid");
}

}  // namespace
}  // namespace rm::test
