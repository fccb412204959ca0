#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

double field(const nlohmann::json& j, const char* part, const char* key) { return j["partitions"][part][key].get<double>(); }

TEST(CliImbalance, HelpNamesTheOptions) {
  auto r = run_cli("imbalance --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--set"));
  EXPECT_THAT(r.out, HasSubstr("--json"));
  EXPECT_THAT(r.out, HasSubstr("--csv"));
}

TEST(CliImbalance, DenseCausalMatchesTheClosedForms) {
  // cp = 8 on one 8-GPU node: contiguous's last rank holds (2cp-1)/cp of the mean work,
  // zigzag pairs chunk i with 2cp-1-i and is balanced.
  auto r = run_cli(
      "imbalance --json --set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring "
      "--set workload.seq_len=64k --set workload.pattern=dense-causal");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(field(j, "contiguous", "worker_imbalance"), 15.0 / 8.0, 0.02);
  EXPECT_NEAR(field(j, "zigzag", "worker_imbalance"), 1.0, 0.01);
  EXPECT_NEAR(field(j, "stripe", "worker_imbalance"), 1.0, 0.02);
  EXPECT_LE(field(j, "balanced", "worker_imbalance"), field(j, "stripe", "worker_imbalance") + 1e-9);
  // A ring pays at least the worker-level imbalance at every step.
  for (const char* p : {"contiguous", "zigzag", "stripe", "balanced"})
    EXPECT_GE(field(j, p, "step_imbalance"), field(j, p, "worker_imbalance") - 1e-9) << p;
}

TEST(CliImbalance, SparseDefaultStripeBeatsZigzagAtStepLevel) {
  auto r = run_cli("imbalance --json --set workload.seq_len=128k --partition zigzag --partition stripe");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // At 128K the sink columns weigh more than at 512K (docs/imbalance.md), so only the order is asserted here.
  EXPECT_GT(field(j, "zigzag", "step_imbalance"), 1.5);
  EXPECT_LT(field(j, "stripe", "step_imbalance"), field(j, "zigzag", "step_imbalance") - 0.1);
  EXPECT_LT(field(j, "stripe", "worker_imbalance"), 1.05);
  EXPECT_FALSE(j["partitions"].contains("contiguous"));
  EXPECT_EQ(j["partitions"]["stripe"]["layers"].size(), 36u);
}

TEST(CliImbalance, TableAndCsvFromAnyFolder) {
  const auto dir = std::filesystem::temp_directory_path() / ("rm_cli_csv_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto r = run_cli("imbalance --set workload.seq_len=64k --csv out.csv --partition stripe", dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("partition"));
  EXPECT_THAT(r.out, HasSubstr("stripe"));
  const std::string csv = slurp((dir / "out.csv").string());
  EXPECT_THAT(csv, HasSubstr("partition,layer,worker_imbalance,step_imbalance"));
  EXPECT_THAT(csv, HasSubstr("stripe,total,"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 36 + 1);
  std::filesystem::remove_all(dir);
}

TEST(CliImbalance, BadInputIsOneLineAndNonZero) {
  struct Case {
    std::string args, want;
  };
  const std::vector<Case> cases = {
      {"imbalance --set workload.pattern=nope", "unknown pattern \"nope\""},
      {"imbalance --set parallel.cp=64", "exceeds the 32 GPUs"},
      {"imbalance --set parallel.stripe_tokens=96", "stripe partition needs workload.seq_len divisible"},
      {"imbalance /no/such/experiment.json", "not found"},
      {"imbalance --set parallel.cp=eight", "$.parallel.cp: expected an integer"},
      {"imbalance --partition diagonal", "--partition: expected contiguous"},
  };
  for (const auto& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.want)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST(CliImbalance, LayoutErrorsAreConfigErrorsForEveryCommand) {
  // 12 context ranks over 8-GPU nodes: 8 on one node, 4 on the next.
  for (const char* cmd : {"imbalance", "schedule", "simulate"}) {
    auto r = run_cli(std::string(cmd) +
                     " --set parallel.cp=12 --set parallel.ring=hierarchical --set workload.seq_len=48k"
                     " --set model.layers=1 --set workload.pattern=dense-causal");
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("$.parallel.ring: hierarchical needs as many context ranks on every node")) << cmd;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << ": " << r.err;
    EXPECT_EQ(r.out, "") << cmd;
  }
}

TEST(CliImbalance, UnwritableCsvLeavesNoFile) {
  auto r = run_cli("imbalance --set workload.seq_len=64k --partition stripe --csv /nonexistent-dir/out.csv");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent-dir/out.csv"));
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/out.csv"));
}

}  // namespace
}  // namespace rm::test
