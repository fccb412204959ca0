// The configs that let `ringmaster` predict and export runs of the runtime's
// cpu backend (docs/configs.md, "CPU machines"): the CPU clusters, tiny models,
// the cpu_reference kernel table and the runtime-tiny-* experiments, through
// the real CLI. Simulations must give figures the kernel table bounds; every
// attention kind the runtime's tests run must export, on 2 and 4 ranks.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// Lowest and highest TFLOP/s of the cpu_reference entry listing `gpu_model`.
std::pair<double, double> kernel_rate_range(const std::string& gpu_model) {
  const auto k = read_json(std::filesystem::path(RINGMASTER_SOURCE_DIR) / "configs/kernels/cpu_reference.json");
  double lo = 1e30, hi = 0;
  for (const auto& g : k.at("gpus")) {
    const auto& models = g.at("models");
    if (std::find(models.begin(), models.end(), gpu_model) == models.end()) continue;
    for (const char* dir : {"fwd_tflops", "bwd_tflops"})
      for (const char* mask : {"full", "causal"})
        for (const auto& p : g.at(dir).at(mask)) {
          lo = std::min(lo, p.at(1).get<double>());
          hi = std::max(hi, p.at(1).get<double>());
        }
  }
  return {lo, hi};
}

// Attention-only scopes on a compute-bound CPU: the step takes at least the
// executed tile FLOPs per rank at the table's best rate, and not much more than
// at its worst (merges, launches and a sub-millisecond exchange on top).
void expect_bounded_by_kernel_table(const nlohmann::json& j, const std::string& gpu_model) {
  const auto [lo, hi] = kernel_rate_range(gpu_model);
  ASSERT_GT(lo, 0) << "no cpu_reference entry for " << gpu_model;
  const double per_rank = j.at("flops").at("executed").get<double>() / j.at("gpus").get<double>();
  const double step = j.at("step_time_s").get<double>();
  EXPECT_GE(step, per_rank / (hi * 1e12) * (1 - 1e-9));
  EXPECT_LE(step, 1.2 * per_rank / (lo * 1e12));
}

void expect_fits(const nlohmann::json& j, double capacity_GB) {
  const auto& m = j.at("memory");
  EXPECT_FALSE(m.at("oom").get<bool>());
  EXPECT_DOUBLE_EQ(m.at("capacity_GB").get<double>(), capacity_GB);
  EXPECT_GT(m.at("peak_GB").get<double>(), 0);
  EXPECT_LT(m.at("peak_GB").get<double>(), capacity_GB);
}

TEST(CliCpuConfigs, RingQuickStartSimulatesOnTheTwoCoreMachine) {
  auto r = run_cli("simulate --json runtime-tiny-ring");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& e = j.at("experiment");
  EXPECT_EQ(e.at("cluster"), "cpu-2core-1x2");
  EXPECT_EQ(e.at("model"), "tiny-gqa-2l");
  EXPECT_EQ(e.at("kernel").at("attention"), "cpu_reference");
  EXPECT_EQ(e.at("gpus_used"), 2);
  EXPECT_EQ(j.at("generator"), "zigzag-ring");
  EXPECT_GT(j.at("step_time_s").get<double>(), 0);
  EXPECT_NEAR(j.at("dense_equivalent_speedup").get<double>(), 1.0, 1e-9);  // dense causal
  EXPECT_EQ(j.at("bound_by").at("kind"), "compute");  // a core is slow next to shared memory
  expect_bounded_by_kernel_table(j, "Xeon-AVX512-1core");
  expect_fits(j, 12);
}

TEST(CliCpuConfigs, SparseExperimentIsSparserAndStillBounded) {
  auto r = run_cli("simulate --json runtime-tiny-sparse");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("experiment").at("workload").at("pattern"), "tiny-static-vs");
  // The static pattern skips tiles at 8K (about 2.9x fewer than dense causal).
  EXPECT_GT(j.at("dense_equivalent_speedup").get<double>(), 2.0);
  EXPECT_LT(j.at("imbalance").at("worker").get<double>(), 1.1);  // the stripe partition balances it
  expect_bounded_by_kernel_table(j, "Xeon-AVX512-1core");
  expect_fits(j, 12);
}

TEST(CliCpuConfigs, SixteenCoreMachineIsFasterPerRank) {
  // A 4-rank ring on the 16-core machine (4 cores per rank) against the 2-rank
  // quick start on the 2-core machine: half the tokens per rank, faster ranks.
  const std::string four = " --set parallel.cp=4 --set parallel.partition=zigzag";
  auto r16 = run_cli("simulate --json runtime-tiny-ring --set cluster=cpu-16core-1x4" + four);
  ASSERT_EQ(r16.exit_code, 0) << r16.err;
  const auto j16 = nlohmann::json::parse(r16.out);
  expect_bounded_by_kernel_table(j16, "Xeon-AVX512-4core");
  expect_fits(j16, 32);
  auto r2 = run_cli("simulate --json runtime-tiny-ring");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_LT(j16.at("step_time_s").get<double>(), nlohmann::json::parse(r2.out).at("step_time_s").get<double>());
}

TEST(CliCpuConfigs, LayerAndStepScopesFit) {
  for (const char* scope : {"layer", "step"}) {
    auto r = run_cli(std::string("simulate --json runtime-tiny-ring --set scope=") + scope);
    ASSERT_EQ(r.exit_code, 0) << scope << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j.at("step_time_s").get<double>(), 0) << scope;
    expect_fits(j, 12);
  }
}

TEST(CliCpuConfigs, DenseKernelTablesHaveNoCpuEntry) {
  // fa2's table lists GPUs only: the error names the key and the CPU "GPU".
  auto r = run_cli("simulate runtime-tiny-ring --set kernel.attention=fa2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("no entry for GPU Xeon-AVX512-1core"));
}

struct Export {
  std::string name;         // test label
  std::string experiment;
  std::string sets;
  int ranks;
  std::string generator;    // the Schedule's generator: which attention kind it is
};

class CliCpuExport : public ::testing::TestWithParam<Export> {};

const std::string k4 = " --set cluster=cpu-16core-1x4";
const std::string k2x2 = k4 + " --set cluster.nodes=2 --set cluster.gpus_per_node=2";

// Every attention kind the runtime's tests run (issue 11), exported as they would.
const Export kExports[] = {
    {"ZigzagRing", "runtime-tiny-ring", "", 2, "zigzag-ring"},
    {"ContiguousRing", "runtime-tiny-ring", " --set parallel.partition=contiguous", 2, "contiguous-ring"},
    {"StripeRing", "runtime-tiny-ring", " --set parallel.partition=stripe", 2, "stripe-ring"},
    {"BalancedRing", "runtime-tiny-ring", " --set parallel.partition=balanced", 2, "balanced-ring"},
    {"Ulysses", "runtime-tiny-ring", " --set parallel.hp=2 --set parallel.cp=1", 2, "ulysses"},
    {"LayerScope", "runtime-tiny-ring", " --set scope=layer", 2, "zigzag-ring"},
    {"SparseStripe", "runtime-tiny-sparse", "", 2, "stripe-ring"},
    // The same pattern with indices rebuilt online: the Schedule adds index building.
    {"SparseDynamic", "runtime-tiny-sparse", " --set workload.pattern.dynamic=true", 2, "stripe-ring"},
    {"ZigzagRing4", "runtime-tiny-ring", k4 + " --set parallel.cp=4", 4, "zigzag-ring"},
    {"DoubleRing", "runtime-tiny-ring",
     k4 + " --set parallel.cp=4 --set parallel.ring=double_ring --set parallel.window=2", 4, "zigzag-double_ring"},
    {"Hierarchical2RankNodes", "runtime-tiny-ring", k2x2 + " --set parallel.cp=4 --set parallel.ring=hierarchical", 4,
     "zigzag-hierarchical"},
    {"TwoD", "runtime-tiny-ring",
     k4 + " --set parallel.hp=2 --set parallel.cp=2 --set parallel.ring=double_ring --set parallel.window=2", 4,
     "2d-zigzag-double_ring"},
    {"Ulysses4", "runtime-tiny-ring", k4 + " --set parallel.hp=4 --set parallel.cp=1", 4, "ulysses"},
    {"SparseHierarchical", "runtime-tiny-sparse", k2x2 + " --set parallel.cp=4 --set parallel.ring=hierarchical", 4,
     "stripe-hierarchical"},
    {"MhaStripe4", "runtime-tiny-ring",
     k4 + " --set model=tiny-mha-2l --set parallel.cp=4 --set parallel.partition=stripe", 4, "stripe-ring"},
};

TEST_P(CliCpuExport, WritesAScheduleForEveryRank) {
  const Export& x = GetParam();
  const auto dir = temp_dir("cli_cpu_export_" + x.name);
  const auto plain = dir / "s.json", packed = dir / "s.json.gz";
  auto r = run_cli("schedule " + x.experiment + x.sets + " -o '" + plain.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = read_json(plain);
  EXPECT_EQ(s.at("format"), "ringmaster.schedule");
  EXPECT_EQ(s.at("version"), 2);
  EXPECT_EQ(s.at("ranks").size(), size_t(x.ranks));
  EXPECT_GT(s.at("op_count").get<int>(), 0);
  EXPECT_EQ(s.at("generator"), x.generator);
  // The runtime's quick start reads the gzipped form; its bytes are the same Schedule.
  auto g = run_cli("schedule " + x.experiment + x.sets + " -o '" + packed.string() + "'");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const std::string bytes = slurp(packed.string());
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  // And it predicts: the exported experiment simulates on the same cluster.
  auto sim = run_cli("simulate --json " + x.experiment + x.sets);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(nlohmann::json::parse(sim.out).at("gpus").get<int>(), x.ranks);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Variants, CliCpuExport, ::testing::ValuesIn(kExports),
                         [](const ::testing::TestParamInfo<Export>& i) { return i.param.name; });

}  // namespace
}  // namespace rm::test
