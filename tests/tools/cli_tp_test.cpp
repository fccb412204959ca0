// `simulate` and `schedule` with tensor parallelism (parallel.tp): the CLI runs it,
// echoes tp, counts its GPUs, carries it in a Schedule file that simulates again, and
// refuses a bad degree with one line naming parallel.tp.
#include <algorithm>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// One 8-GPU node, two layers of 16K tokens: a whole step in about a second.
const std::string kStep =
    " --set cluster=h200-1x8 --set parallel.cp=4 --set parallel.ring=ring --set workload.seq_len=16k"
    " --set model.layers=2";

TEST(CliTensorParallel, SimulatesTp2AndEchoesIt) {
  auto two = run_cli("simulate --json --set parallel.tp=2" + kStep);
  auto one = run_cli("simulate --json" + kStep);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto j2 = nlohmann::json::parse(two.out), j1 = nlohmann::json::parse(one.out);
  EXPECT_EQ(j2["experiment"]["parallel"]["tp"], 2);
  EXPECT_EQ(j1["experiment"]["parallel"]["tp"], 1);
  EXPECT_EQ(j2["experiment"]["gpus_used"], 8);
  EXPECT_EQ(j1["experiment"]["gpus_used"], 4);
  // The same model work on twice the GPUs, faster.
  EXPECT_EQ(j2["flops"]["model"], j1["flops"]["model"]);
  EXPECT_LT(j2["step_time_s"].get<double>(), j1["step_time_s"].get<double>());
  auto text = run_cli("simulate --set parallel.tp=2" + kStep);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(" tp=2 "));
  EXPECT_THAT(text.out, HasSubstr("over 8 ranks"));
}

TEST(CliTensorParallel, ScheduleFileCarriesTp) {
  const auto dir = std::filesystem::temp_directory_path() / ("rm_cli_tp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto w = run_cli("schedule -o tp.json --set parallel.tp=2 --set scope=layer" + kStep, dir.string());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto direct = run_cli("simulate --json --set parallel.tp=2 --set scope=layer" + kStep, dir.string());
  auto again = run_cli("simulate --json --schedule tp.json", dir.string());
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["step_time_s"], nlohmann::json::parse(direct.out)["step_time_s"]);
  std::filesystem::remove_all(dir);
}

TEST(CliTensorParallel, BadDegreeIsOneLineNamingParallelTp) {
  for (const char* tp : {"3", "16", "0", "\"two\""}) {
    auto r = run_cli(std::string("simulate --set parallel.tp=") + tp + kStep);
    EXPECT_EQ(r.exit_code, 2) << tp;
    EXPECT_EQ(r.out, "") << tp;
    EXPECT_THAT(r.err, HasSubstr("ringmaster: error: ")) << tp;
    EXPECT_THAT(r.err, HasSubstr("$.parallel.tp")) << tp;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace rm::test
