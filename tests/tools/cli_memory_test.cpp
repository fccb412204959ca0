// `simulate` reports the per-GPU memory of the configuration (sim/memory/):
// memory.peak_GB, memory.oom and the terms in --json, a memory line in the
// text; a configuration past the GPU's 40 GB is marked oom with its figure,
// not dropped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// MTraining's experiment (A100-40GB), one attention forward simulated: quick, and
// the memory is still that of the whole training step.
const std::string kQuick = " --set scope=attention_fwd --set workload.seq_len=128k";

TEST(CliMemory, JsonHasPeakOomAndTerms) {
  auto r = run_cli("simulate --json" + kQuick);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("memory"));
  const auto& m = j["memory"];
  EXPECT_FALSE(m["oom"].get<bool>());
  EXPECT_DOUBLE_EQ(m["capacity_GB"].get<double>(), 40.0);
  EXPECT_GT(m["peak_GB"].get<double>(), 0);
  EXPECT_LT(m["peak_GB"].get<double>(), 40.0);
  double sum = 0;
  for (const char* k : {"weights", "gradients", "optimizer_state", "checkpoints", "layer_activations",
                        "attention_buffers", "all_to_all", "loss", "fragmentation", "cuda_nccl_context"}) {
    ASSERT_TRUE(m["terms"].contains(k)) << k;
    sum += m["terms"][k].get<double>();
  }
  EXPECT_NEAR(sum, m["peak_GB"].get<double>(), 1e-6);
}

TEST(CliMemory, PastTheGpuIsMarkedOomWithItsFigure) {
  // No recomputation at 512K: every layer's activations stay for the backward.
  auto r = run_cli("simulate --json --set scope=attention_fwd --set parallel.checkpoint=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& m = j["memory"];
  EXPECT_TRUE(m["oom"].get<bool>());
  EXPECT_GT(m["peak_GB"].get<double>(), 40.0);
  EXPECT_NEAR(m["shortfall_GB"].get<double>(), m["peak_GB"].get<double>() - 40.0, 1e-6);
  EXPECT_GT(j["step_time_s"].get<double>(), 0);  // still simulated
  auto text = run_cli("simulate --set scope=attention_fwd --set parallel.checkpoint=none");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("OUT OF MEMORY by"));
}

TEST(CliMemory, AllowancesAndLossChunksAreExperimentKeys) {
  auto a = run_cli("simulate --json" + kQuick);
  auto b = run_cli("simulate --json" + kQuick +
                   " --set cluster.gpu.context_GB=3 --set parallel.loss_chunk_tokens=0");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out)["memory"], jb = nlohmann::json::parse(b.out)["memory"];
  EXPECT_DOUBLE_EQ(jb["terms"]["cuda_nccl_context"].get<double>(), 3.0);
  EXPECT_GT(jb["moments"]["loss"].get<double>(), ja["moments"]["loss"].get<double>() + 2.0);
  auto bad = run_cli("simulate" + kQuick + " --set parallel.loss_chunk_tokens=-1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("loss_chunk_tokens"));
  auto bad2 = run_cli("simulate" + kQuick + " --set cluster.gpu.fragmentation=x");
  EXPECT_EQ(bad2.exit_code, 2);
  EXPECT_THAT(bad2.err, HasSubstr("fragmentation"));
}

}  // namespace
}  // namespace rm::test
