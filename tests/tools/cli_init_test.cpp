// `ringmaster init` through the real CLI: the file it writes loads back in
// `simulate`, the layout uses the cluster (or the divisor of it the sequence
// allows), every value it chose is said, the kernel follows mask and GPU, and
// bad names are one line naming the flag and what exists, with no file left.
#include <algorithm>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

fs::path fresh(const std::string& name) {
  const fs::path d = temp_dir("cli_init") / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(CliInit, WritesAnExperimentThatSimulateLoadsBack) {
  const fs::path d = fresh("roundtrip");
  const std::string file = (d / "job.json").string();
  const auto r = run_cli("init job --model llama3-8b --cluster h100-8x8-ndr --nodes 2 --seq-len 128k -o '" + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + file));
  EXPECT_THAT(r.out, HasSubstr("parallel.cp"));
  EXPECT_THAT(r.out, HasSubstr("every GPU of the cluster (2 nodes x 8)"));
  const auto j = nlohmann::json::parse(slurp(file));
  EXPECT_EQ(j.at("name"), "job");
  EXPECT_EQ(j.at("parallel").at("cp"), 16);
  EXPECT_EQ(j.at("parallel").at("dp"), 1);
  EXPECT_EQ(j.at("parallel").at("partition"), "zigzag");
  EXPECT_EQ(j.at("workload").at("pattern"), "dense-causal");
  EXPECT_EQ(j.at("cluster").at("nodes"), 2);  // the cluster inlined with the asked node count
  EXPECT_EQ(j.at("kernel").at("attention"), "fa3");  // dense mask on Hopper

  const auto sim = run_cli("simulate '" + file + "' --set model.layers=2 --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto s = nlohmann::json::parse(sim.out);
  EXPECT_EQ(s.at("experiment").at("name"), "job");
  EXPECT_EQ(s.at("experiment").at("gpus_used"), 16);
  EXPECT_EQ(s.at("experiment").at("kernel").at("attention"), "fa3");
  EXPECT_GT(s.at("step_time_s").get<double>(), 0);
}

TEST(CliInit, ACpThatDoesNotSplitTheSequenceFallsToADivisorWithDataParallelism) {
  // 64064 = 64 x 1001 tokens on 64 GPUs: 2*64 does not divide it, 2*32 does: cp = 32, dp = 2.
  const auto r = run_cli("init odd --model llama3-8b --cluster a100-80g-8x8-hdr --seq-len 64064 -o - --pattern "
                         "document-causal");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // -o -: the file on stdout, the choices on stderr
  EXPECT_EQ(j.at("parallel").at("cp"), 32);
  EXPECT_EQ(j.at("parallel").at("dp"), 2);
  EXPECT_EQ(j.at("kernel").at("attention"), "fa2");  // document mask on Ampere
  EXPECT_THAT(r.err, HasSubstr("the largest divisor of the 64 GPUs"));
}

TEST(CliInit, JsonSaysTheFileAndEveryChoice) {
  const fs::path d = fresh("json");
  const std::string file = (d / "vs.json").string();
  const auto r = run_cli("init vs --model qwen2.5-3b --cluster a100-40g-4x8-hdr --seq-len 512k --pattern "
                         "topp-synthetic --json -o '" + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("file"), file);
  bool kernel = false;
  for (const auto& c : j.at("chosen"))
    if (c.at("key") == "kernel.attention") {
      kernel = true;
      EXPECT_EQ(c.at("value"), "block_sparse");  // a vertical-slash mask needs the sparse kernel
      EXPECT_THAT(c.at("why").get<std::string>(), HasSubstr("vertical_slash mask on ampere"));
    }
  EXPECT_TRUE(kernel);
  EXPECT_EQ(nlohmann::json::parse(slurp(file)), j.at("experiment"));
}

TEST(CliInit, AConfigGivenAsARelativePathStillLoadsFromElsewhere) {
  const fs::path d = fresh("paths");
  const std::string file = (d / "sub" / "job.json").string();
  fs::create_directories(d / "sub");
  // From configs/: the model by a path relative to there; the file written in another folder.
  const auto r = run_cli("init job --model models/llama3-8b.json --cluster h200-1x8 --seq-len 64k -o '" + file + "'",
                         std::string(RINGMASTER_SOURCE_DIR) + "/configs");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sim = run_cli("simulate '" + file + "' --set scope=attention_fwd --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(nlohmann::json::parse(sim.out).at("experiment").at("model"), "llama3-8b");
}

TEST(CliInit, KernelNamesTheKernelInsteadOfTheDefault) {
  // ring-flash-attention calls FlashAttention-2, on Hopper too.
  const auto r = run_cli("init rfa --model llama3-8b --cluster h800-1x8 --seq-len 64k --kernel fa2 -o -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("kernel").at("attention"), "fa2");
  EXPECT_THAT(r.err, Not(HasSubstr("kernel.attention")));  // not a choice made for the user
  // Volta has no default: init says so, naming the key --kernel sets.
  const auto v = run_cli("init v --model llama3-8b --cluster v100-dgx1-1x8 --seq-len 64k -o -");
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_THAT(v.err, HasSubstr("no attention kernel is shipped for volta GPUs"));
  const auto bad = run_cli("init v --model llama3-8b --cluster v100-dgx1-1x8 --seq-len 64k --kernel nope -o -");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--kernel: unknown kernel \"nope\""));
}

TEST(CliInit, BadInputIsOneLineNamingTheFlagAndNoFile) {
  const fs::path d = fresh("bad");
  const std::string file = (d / "x.json").string();
  struct Case {
    std::string args, what;
  };
  for (const Case& c : {Case{"--model llama9 --cluster h200-1x8 --seq-len 64k", "--model: unknown model \"llama9\" (known: "},
                        Case{"--model llama3-8b --cluster dgx9 --seq-len 64k", "--cluster: unknown cluster \"dgx9\""},
                        Case{"--model llama3-8b --cluster h200-1x8 --seq-len 64k --pattern swiss", "unknown pattern"},
                        Case{"--model llama3-8b --cluster h200-1x8 --seq-len lots", "--seq-len"},
                        Case{"--model llama3-8b --cluster h200-1x8 --seq-len 64k --nodes -1", "--nodes"},
                        Case{"--model llama3-8b --seq-len 64k", "--cluster"}}) {
    const auto r = run_cli("init x " + c.args + " -o '" + file + "'");
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.what)) << c.args;
    EXPECT_FALSE(fs::exists(file)) << c.args;
  }
  // An existing file is kept unless --force.
  ASSERT_EQ(run_cli("init x --model llama3-8b --cluster h200-1x8 --seq-len 64k -o '" + file + "'").exit_code, 0);
  const auto again = run_cli("init x --model llama3-8b --cluster h200-1x8 --seq-len 64k -o '" + file + "'");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("the file exists"));
  EXPECT_EQ(run_cli("init x --model llama3-8b --cluster h200-1x8 --seq-len 64k --force -o '" + file + "'").exit_code,
            0);
}

}  // namespace
}  // namespace rm::test
