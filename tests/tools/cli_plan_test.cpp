// `ringmaster plan` end to end on a small space: the JSON keys users script
// against, the text table, the exported winner's Schedule (simulated again it
// gives the planner's figure), fixed keys, determinism and bad input.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// The default experiment shrunk to 2 layers and 8K tokens on 4 GPUs of one node.
const std::string kShape =
    " --set cluster=h200-1x8 --set workload.seq_len=8k --set model.layers=2 --set parallel.cp=4"
    " --set parallel.ring=ring --stripe-tokens 128 --top 3";
const std::string kSmall = kShape + " --gpus 4 --jobs 2";

TEST(CliPlan, JsonHasTheBestAndTheCandidates) {
  const auto r = run_cli("plan --json --engine-confirm simgrid" + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& best = j.at("best");
  for (const char* k : {"dp", "hp", "cp", "partition", "ring", "window", "placement", "checkpoint", "zero_stage",
                        "shuffle", "ring_order", "stripe_tokens"})
    EXPECT_TRUE(best.at("config").contains(k)) << k;
  EXPECT_GT(best.at("step_time_s").get<double>(), 0);
  EXPECT_TRUE(best.contains("memory_GB"));
  EXPECT_EQ(best.at("engine"), "simgrid");
  ASSERT_EQ(j.at("candidates").size(), 3u);
  EXPECT_EQ(j.at("candidates")[0].at("config"), best.at("config"));
  for (size_t i = 1; i < 3; ++i) EXPECT_FALSE(j.at("candidates")[i].at("reason").get<std::string>().empty());
  const auto& s = j.at("search");
  EXPECT_EQ(s.at("gpus"), 4);
  EXPECT_EQ(s.at("enumerated").get<int64_t>(),
            s.at("invalid").get<int64_t>() + s.at("out_of_memory").get<int64_t>() + s.at("screened_out").get<int64_t>() +
                s.at("pruned_by_bound").get<int64_t>() + s.at("simulated").get<int64_t>());
  EXPECT_GT(s.at("screen_layer_simulations").get<int64_t>(), 0);
  EXPECT_GE(s.at("confirmed_simgrid").get<int64_t>(), 3);
  // The experiment's own layout is reported beside the winner, and is no faster.
  EXPECT_TRUE(j.at("seed").at("in_space").get<bool>());
  EXPECT_LE(best.at("step_time_s").get<double>(), j.at("seed").at("step_time_s").get<double>() * (1 + 1e-12));
}

TEST(CliPlan, AnExperimentWhoseLayoutDoesNotFitTheClusterIsPlannedFromOneGpu) {
  // The default experiment's cp = 32 cannot run on one 8-GPU node: the layout restarts from
  // one GPU (the seed), and the search covers the node.
  const std::string shape = " --set cluster=h200-1x8 --set workload.seq_len=8k --set model.layers=2"
                            " --stripe-tokens 128 --top 2 --engine-confirm none --jobs 2";
  const auto r = run_cli("plan --json" + shape);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("seed").at("reset_to_one_gpu").get<bool>());
  EXPECT_EQ(j.at("seed").at("config").at("cp"), 1);
  EXPECT_EQ(j.at("search").at("gpus"), 8);
  EXPECT_LE(j.at("best").at("step_time_s").get<double>(), j.at("seed").at("step_time_s").get<double>());
  // A key the user set stays an error when it is the one that does not fit.
  const auto bad = run_cli("plan --json --set parallel.cp=64" + shape);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("parallel.cp"));
  EXPECT_TRUE(bad.out.empty());
}

TEST(CliPlan, TextShowsTheWinnerAndATable) {
  const auto r = run_cli("plan --engine-confirm none" + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("winner  dp"));
  EXPECT_THAT(r.out, HasSubstr("seed    "));
  EXPECT_THAT(r.out, HasSubstr("why it lost"));
  EXPECT_THAT(r.out, HasSubstr("searched "));
}

TEST(CliPlan, OutputIsDeterministic) {
  const auto a = run_cli("plan --json --engine-confirm none --jobs 1" + kShape + " --gpus 4");
  const auto b = run_cli("plan --json --engine-confirm none --jobs 2" + kShape + " --gpus 4");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(CliPlan, ExportedScheduleSimulatesToThePlannedTime) {
  const auto dir = temp_dir("rm_cli_plan");
  const std::string file = (dir / "winner.json.gz").string();
  const auto r = run_cli("plan --json --engine-confirm none --export '" + file + "'" + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  const auto sim = run_cli("simulate --json --schedule '" + file + "'");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto j = nlohmann::json::parse(sim.out);
  EXPECT_EQ(j.at("step_time_s").get<double>(), plan.at("best").at("analytic_step_time_s").get<double>());
  EXPECT_EQ(j.at("experiment").at("parallel"), plan.at("best").at("config"));
  std::filesystem::remove_all(dir);
}

TEST(CliPlan, ASetKeyIsFixed) {
  const auto r = run_cli("plan --json --engine-confirm none --set parallel.checkpoint=selective --fix parallel.cp" +
                         kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& c : nlohmann::json::parse(r.out).at("candidates")) {
    EXPECT_EQ(c.at("config").at("checkpoint"), "selective");
    EXPECT_EQ(c.at("config").at("cp"), 4);
  }
}

TEST(CliPlan, ListOptionsTakeOneValuePerFlag) {
  // The experiment after --fix and --stripe-tokens is the positional, not a second value.
  const auto r = run_cli("plan --json --engine-confirm none --gpus 4 --jobs 2 --fix parallel.ring --stripe-tokens 128,512"
                         " --set cluster=h200-1x8 --set workload.seq_len=8k --set model.layers=2 --set parallel.cp=4"
                         " --fix parallel.checkpoint mtraining-qwen2.5-3b-512k");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("experiment").at("name"), "mtraining-qwen2.5-3b-512k");
  for (const auto& c : j.at("candidates")) {
    EXPECT_EQ(c.at("config").at("ring"), "hierarchical");
    EXPECT_EQ(c.at("config").at("checkpoint"), "full");
  }
}

TEST(CliPlan, BadInputIsOneLineAndNoOutput) {
  const std::string dir = (temp_dir("rm_cli_plan_bad") / "never.json.gz").string();
  for (const std::string& args :
       {std::string("plan --fix parallel.bogus") + kSmall, std::string("plan --engine-confirm maybe") + kSmall,
        std::string("plan --top 0") + kSmall, std::string("plan --gpus 9999") + kSmall,
        std::string("plan --symmetry dp") + kSmall, std::string("plan --extrapolate always") + kSmall,
        std::string("plan --screen-budget -1") + kSmall, std::string("plan --screen-budget many") + kSmall,
        std::string("plan --screen-budget 8x") + kSmall,
        // 7 GPUs with dp fixed at 1: no cp or hp of 7 divides 8K tokens and 16 heads.
        std::string("plan --fix parallel.dp --export '") + dir + "'" + kShape + " --gpus 7"}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("ringmaster: error: ")) << args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// A plan that needs neither the shortcut nor an estimate prints no key about
// them; a budgeted screen says it stopped, in the text and the JSON, and its
// counts still add up.
TEST(CliPlan, ScaleKeysOnlyWhereTheyApply) {
  const auto r = run_cli("plan --json --engine-confirm none" + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"estimated_steps", "one_replica_simulations", "screen_budget_hit", "screen_too_large"})
    EXPECT_FALSE(j.at("search").contains(k)) << k;
  EXPECT_EQ(j.at("search").at("screen_budget").get<int64_t>(), 0) << "--screen-budget auto: no limit on 4 GPUs";
  for (const auto& c : j.at("candidates")) {
    EXPECT_FALSE(c.contains("estimated"));
    EXPECT_FALSE(c.contains("simgrid_skipped"));
    EXPECT_TRUE(c.contains("bound_by")) << "the printed candidates carry what bounds them";
  }
  const auto b = run_cli("plan --json --engine-confirm none --screen-budget 8" + kSmall);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto s = nlohmann::json::parse(b.out).at("search");
  EXPECT_TRUE(s.at("screen_budget_hit").get<bool>());
  EXPECT_EQ(s.at("screen_budget").get<int64_t>(), 8);
  EXPECT_LE(s.at("screen_layer_simulations").get<int64_t>(), 8 + 1);  // the seed's layer besides
  EXPECT_LT(s.at("screen_layer_simulations").get<int64_t>(), j.at("search").at("screen_layer_simulations").get<int64_t>());
  EXPECT_EQ(s.at("enumerated").get<int64_t>(),
            s.at("invalid").get<int64_t>() + s.at("out_of_memory").get<int64_t>() + s.at("screened_out").get<int64_t>() +
                s.at("pruned_by_bound").get<int64_t>() + s.at("simulated").get<int64_t>());
  const auto t = run_cli("plan --engine-confirm none --screen-budget 8" + kSmall);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("the screen stopped at its budget of 8 layer simulations"));
}

TEST(CliPlan, NothingFitsNamesTheSmallestShortfall) {
  const auto r = run_cli("plan" + kSmall + " --set cluster.gpu.memory_GB=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("fits in GPU memory (1 GB): the closest, dp"));
  EXPECT_THAT(r.err, HasSubstr("GB more"));
}

// Issue 41: the default experiment on 100,000 nodes (800,000 GPUs) at 16G
// tokens enumerated for minutes, printing nothing (its hierarchical rings are
// checked rank by rank). Its space is counted and its enumeration estimated
// before anything is enumerated, and refused in one line naming the count, the
// estimate and how to narrow it. (ctest also runs this test alone with a short TIMEOUT:
// cli_plan_enormous_cluster, tests/tools/CMakeLists.txt.)
TEST(CliPlan, AnEnormousClusterIsAnsweredAtOnce) {
  const auto r = run_cli("plan --set cluster.nodes=100000 --set workload.seq_len=16G");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the search space of 800000 GPUs holds "));
  EXPECT_THAT(r.err, HasSubstr("above the planner's limits (2000000 layouts, ~60 s)"));
  EXPECT_THAT(r.err, HasSubstr("--fix KEY"));
}

}  // namespace
}  // namespace rm::test
