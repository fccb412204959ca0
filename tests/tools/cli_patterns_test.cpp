// The masks users train with, end to end through the real binary: full
// attention and packed documents (causal and full, every length
// distribution) simulate under every partition and ring kind, `imbalance`
// reports them, workload.pattern defaults to dense-causal, and a bad
// document field is a one-line error naming it.
#include <algorithm>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// 16K tokens, cp = 8 on the default 4-node cluster: small enough to run 100 times.
// The default cluster's A100 bf16 peak (configs/clusters/a100-40g-4x8-hdr.json), which MFU divides by.
constexpr double kA100PeakFlops = 312e12;

const std::string kSmall = "--set workload.seq_len=16k --set parallel.cp=8 --set parallel.window=2 --set scope=attention_fwd ";

const char* kDocumentPatterns[] = {
    "--set workload.pattern=document-causal",
    "--set workload.pattern=document-full",
    "--set workload.pattern=document-causal-capped",
    "--set workload.pattern=document-causal-histogram",
    "--set workload.pattern=document-full --set 'workload.pattern.documents={\"distribution\": \"list\", \"lengths\": [\"1k\", 3000, \"512\"]}'",
    "--set workload.pattern=document-causal --set 'workload.pattern.documents={\"distribution\": \"fractions\", \"max_fraction\": 0.25}'",
};

nlohmann::json simulate(const std::string& args) {
  const auto r = run_cli("simulate --json " + kSmall + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(CliPatterns, EveryDenseFamilyPatternRunsUnderEveryPartitionAndRing) {
  std::vector<std::string> patterns{"--set workload.pattern=dense-full"};
  patterns.insert(patterns.end(), std::begin(kDocumentPatterns), std::end(kDocumentPatterns));
  for (const auto& pat : patterns) {
    // Every layout computes the same mask: the model's FLOPs are the pattern's,
    // whatever the partition or ring; and no layout runs above the GPUs' peak.
    double model = -1;
    for (const char* part : {"contiguous", "zigzag", "stripe", "balanced"})
      for (const char* ring : {"ring", "double_ring", "hierarchical"}) {
        const std::string args = pat + " --set parallel.partition=" + part + " --set parallel.ring=" + ring;
        const auto j = simulate(args);
        if (j.is_null()) continue;
        const double flops = j["flops"]["model"].get<double>(), mfu = j["mfu"].get<double>();
        EXPECT_GT(flops, 0) << args;
        if (model < 0) model = flops;
        EXPECT_EQ(flops, model) << args << ": another layout of the same mask has other model FLOPs";
        EXPECT_GE(j["flops"]["executed"].get<double>(), flops * (1 - 1e-12)) << args << ": tiles cover every allowed pair";
        EXPECT_GT(mfu, 0) << args;
        EXPECT_LE(mfu, 1) << args;
        EXPECT_NEAR(mfu * j["step_time_s"].get<double>(), flops / (j["gpus"].get<double>() * kA100PeakFlops), 1e-9 * flops / kA100PeakFlops)
            << args << ": MFU is the model FLOPs over the step's GPU-seconds at peak";
      }
  }
}

TEST(CliPatterns, HeadParallelAndUlyssesRunFullAndDocumentMasks) {
  for (const char* pat : {"dense-full", "document-full", "document-causal"}) {
    double model = -1;
    for (const char* par : {"--set parallel.hp=2 --set parallel.cp=4 --set parallel.ring=double_ring",
                            "--set parallel.hp=8 --set parallel.cp=1"}) {
      const auto j = simulate(std::string("--set scope=layer --set workload.pattern=") + pat + " " + par);
      if (j.is_null()) continue;
      const double flops = j["flops"]["model"].get<double>(), mfu = j["mfu"].get<double>();
      // Head parallelism splits heads, not the mask: both layouts compute the same layer.
      if (model < 0) model = flops;
      EXPECT_EQ(flops, model) << pat << " " << par;
      EXPECT_GT(mfu, 0) << pat << " " << par;
      EXPECT_LE(mfu, 1) << pat << " " << par;
    }
  }
}

TEST(CliPatterns, FullAttentionComputesEveryPair) {
  // attention_fwd: model FLOPs are 4·head_dim·heads per allowed pair, so full
  // over causal is S^2 / (S(S+1)/2) at S = 16384, whatever the partition.
  for (const char* part : {"contiguous", "stripe"}) {
    const auto j = simulate(std::string("--set workload.pattern=dense-full --set parallel.partition=") + part);
    ASSERT_FALSE(j.is_null());
    const double s = 16384;
    EXPECT_NEAR(j["flops"]["model"].get<double>() / j["flops"]["dense_causal_model"].get<double>(), 2 * s / (s + 1), 1e-9) << part;
    EXPECT_DOUBLE_EQ(j["flops"]["executed"].get<double>(), j["flops"]["model"].get<double>()) << part;
  }
}

TEST(CliPatterns, ImbalanceReportsFullAndDocumentMasks) {
  // Full attention gives every rank every key: balanced under any partition.
  auto r = run_cli("imbalance --json " + kSmall + "--set workload.pattern=dense-full");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* p : {"contiguous", "zigzag", "stripe", "balanced"})
    EXPECT_NEAR(j["partitions"][p]["worker_imbalance"].get<double>(), 1.0, 1e-9) << p;
  for (const char* pat : kDocumentPatterns) {
    r = run_cli("imbalance --json " + kSmall + pat);
    ASSERT_EQ(r.exit_code, 0) << pat << "\n" << r.err;
    j = nlohmann::json::parse(r.out);
    for (const char* p : {"contiguous", "zigzag", "stripe", "balanced"})
      EXPECT_GE(j["partitions"][p]["worker_imbalance"].get<double>(), 1.0 - 1e-9) << pat << " " << p;
  }
}

TEST(CliPatterns, PatternDefaultsToDenseCausal) {
  const auto dir = temp_dir("rm_cli_patterns");
  std::ofstream(dir / "no-pattern.json") << R"({"name": "no-pattern", "cluster": "h200-1x8", "model": "qwen2.5-3b",
    "workload": {"seq_len": "16k"}, "parallel": {"cp": 8, "partition": "zigzag"}, "scope": "attention_fwd"})";
  const auto without = run_cli("simulate --json no-pattern.json", dir.string());
  const auto with = run_cli("simulate --json no-pattern.json --set workload.pattern=dense-causal", dir.string());
  ASSERT_EQ(without.exit_code, 0) << without.err;
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(nlohmann::json::parse(without.out)["step_time_s"], nlohmann::json::parse(with.out)["step_time_s"]);
  EXPECT_THAT(run_cli("simulate no-pattern.json", dir.string()).out, HasSubstr("pattern=dense-causal"));
}

TEST(CliPatterns, BadDocumentFieldsNameTheField) {
  const struct {
    const char* set;
    const char* names;
  } cases[] = {
      {"workload.pattern.documents.distribution=zipf", "$.documents.distribution: expected one of list, uniform, histogram, fractions"},
      {"'workload.pattern.documents={\"distribution\": \"uniform\", \"min_tokens\": 0, \"max_tokens\": 10}'", "$.documents.min_tokens"},
      {"'workload.pattern.documents={\"distribution\": \"list\", \"lengths\": []}'", "$.documents.lengths: expected a non-empty array"},
      {"'workload.pattern.documents={\"distribution\": \"list\", \"lengths\": [\"1k\", -5]}'", "$.documents.lengths[1]"},
      {"'workload.pattern.documents={\"distribution\": \"fractions\", \"max_fraction\": 1.5}'", "$.documents.max_fraction"},
      {"'workload.pattern.documents={\"distribution\": \"histogram\", \"bins\": [{\"min_tokens\": 8, \"max_tokens\": 9}]}'", "$.documents.bins[0].weight"},
      {"'workload.pattern.documents={\"distribution\": \"uniform\", \"min_tokens\": 8, \"max_tokens\": 9, \"cap\": 3}'", "$.documents.cap: unknown key"},
      {"workload.pattern.min_doc_tokens=4096", "$.min_doc_tokens: unknown key"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(std::string("simulate --set workload.pattern=document-full --set ") + c.set);
    EXPECT_NE(r.exit_code, 0) << c.set;
    EXPECT_THAT(r.err, HasSubstr(c.names)) << c.set;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace rm::test
