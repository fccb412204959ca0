// The fit recovers parameters it knows: runs "measured" by simulating with
// known parameters, calibrated from cpu-2core-1x2's, give back the known
// values (exactly without noise, within a bound with noise); parameters no
// op exercises stay; the held-out split is deterministic; the written JSON
// loads and re-simulates to the measured step.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/calibrate/fit.hpp"
#include "sim/calibrate/validate.hpp"
#include "sim/config/json_reader.hpp"
#include "tests/sim/calibrate_support.hpp"

namespace rm::calibrate {
namespace {

using CalRun = calibrate::Run;

using synth::synthetic_run;

// Layer scope (GEMMs and elementwise ops pin the launch overhead) and
// attention scope at three lengths and two batches (three table points,
// differing work at each), on the 2-rank zigzag ring.
std::vector<Run> runs_for(const CostParams& truth, double noise) {
  std::vector<Run> out;
  uint64_t seed = 1;
  for (const char* len : {"2k", "4k", "8k"})
    for (const char* scope : {"attention_fwd_bwd", "layer"})
      out.push_back(synthetic_run("runtime-tiny-ring",
                                  synth::with_nvswitch({std::string("workload.seq_len=") + len, std::string("scope=") + scope}),
                                  truth, noise, seed++));
  out.push_back(synthetic_run("runtime-tiny-ring", synth::with_nvswitch({"workload.seq_len=4k", "workload.batch=2"}), truth,
                              noise, seed++));
  return out;
}

std::vector<const CalRun*> ptrs(const std::vector<Run>& runs) {
  std::vector<const CalRun*> p;
  for (const Run& r : runs) p.push_back(&r);
  return p;
}

const ParamFit& param(const FitResult& f, const std::string& name) {
  for (const ParamFit& p : f.params)
    if (p.name == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return f.params.front();
}

class CalibrateFit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new CostParams(synth::params_of(synth::experiment("runtime-tiny-ring", synth::kNvswitchOnly)));
    truth_ = new CostParams(synth::truth_from(*base_));
    exact_runs_ = new std::vector<calibrate::Run>(runs_for(*truth_, 0));
    exact_ = new FitResult(fit(ptrs(*exact_runs_), *base_));
  }
  static void TearDownTestSuite() {
    delete exact_;
    delete exact_runs_;
    delete truth_;
    delete base_;
  }
  static CostParams* base_;
  static CostParams* truth_;
  static std::vector<calibrate::Run>* exact_runs_;
  static FitResult* exact_;
};
CostParams* CalibrateFit::base_ = nullptr;
CostParams* CalibrateFit::truth_ = nullptr;
std::vector<calibrate::Run>* CalibrateFit::exact_runs_ = nullptr;
FitResult* CalibrateFit::exact_ = nullptr;

TEST_F(CalibrateFit, RecoversKnownParametersExactlyWithoutNoise) {
  const FitResult& f = *exact_;
  EXPECT_GT(f.rms_rel_before, 0.1);
  EXPECT_LT(f.rms_rel_after, 1e-9);
  EXPECT_EQ(f.rerouted, 0);
  for (const auto& [name, want] : std::vector<std::pair<std::string, double>>{{"cost.gemm_efficiency", 0.5},
                                                                              {"cost.elementwise_efficiency", 0.6},
                                                                              {"cost.kernel_launch_us", 20},
                                                                              {"cost.link_efficiency.nvlink", 0.6},
                                                                              {"intra_node.latency_us", 2}}) {
    const ParamFit& p = param(f, name);
    EXPECT_TRUE(p.exercised && p.determined) << name;
    EXPECT_NEAR(p.fitted, want, 1e-6 * want) << name;
  }
  int points = 0;
  for (const ParamFit& p : f.params) {
    if (p.ref.kind != ParamKind::kernel_rate || !p.exercised) continue;
    ++points;
    EXPECT_NEAR(p.fitted, get(*truth_, p.ref), 1e-6 * get(*truth_, p.ref)) << p.name;
  }
  EXPECT_GE(points, 8);  // 1K, 2K, 4K tokens per call: fwd and bwd, full and causal
}

TEST_F(CalibrateFit, ParametersNoOpExercisesStayAsTheyWere) {
  // One node: no PCIe or NIC hop is ever crossed.
  for (const char* name : {"cost.link_efficiency.pcie", "pcie.latency_us", "cost.link_efficiency.network", "nic.latency_us"}) {
    const ParamFit& p = param(*exact_, name);
    EXPECT_FALSE(p.exercised) << name;
    EXPECT_FALSE(p.scaled) << name;
    EXPECT_EQ(p.rows, 0) << name;
    EXPECT_EQ(p.fitted, p.base) << name;
  }
}

TEST_F(CalibrateFit, TablePointsNoCallReachesFollowTheirCurvesNearestFittedPoint) {
  // 512 and 8K tokens per call never occur; the 1K and 4K points were fitted
  // (x 0.7 forward, x 0.75 backward), so the ends move by the same ratios.
  for (const auto& [name, ratio] : std::vector<std::pair<std::string, double>>{
           {"kernel.fwd_full@512", 0.7}, {"kernel.fwd_causal@8192", 0.7}, {"kernel.bwd_causal@512", 0.75},
           {"kernel.bwd_full@8192", 0.75}}) {
    const ParamFit& p = param(*exact_, name);
    EXPECT_FALSE(p.exercised) << name;
    EXPECT_TRUE(p.scaled) << name;
    EXPECT_NEAR(p.fitted, p.base * ratio, 1e-6 * p.base) << name;
  }
}

TEST_F(CalibrateFit, CalibratedParametersReSimulateToTheMeasuredStep) {
  for (const calibrate::Run& r : *exact_runs_) {
    const double measured = measured_step_s(r.measured);
    EXPECT_NEAR(predict_step_s(r, exact_->fitted), measured, 1e-6 * measured) << r.name;
    EXPECT_GT(std::abs(predict_step_s(r, *base_) - measured), 0.05 * measured) << r.name;
  }
}

TEST_F(CalibrateFit, WrittenClusterAndKernelJsonLoadBackToTheFittedValues) {
  const Experiment e = synth::experiment("runtime-tiny-ring", synth::kNvswitchOnly);
  const nlohmann::json cj = cluster_json(e.resolved["cluster"], exact_->fitted.cluster, "test");
  const Cluster c = parse_cluster(JsonReader(cj, "calibrated.json"));
  const nlohmann::json kj = kernel_json(e.resolved["kernel"]["attention"], exact_->fitted.kernel, c.gpu.model, "test");
  const AttentionKernel k = parse_attention_kernel(JsonReader(kj, "kernel.json"), c.gpu);
  const CostParams loaded{c, k};
  for (const ParamRef& r : all_params(k)) EXPECT_DOUBLE_EQ(get(loaded, r), get(exact_->fitted, r)) << param_name(r, k);
  // The other GPU's entry is kept as it was.
  GpuSpec other = c.gpu;
  other.model = "Xeon-AVX512-4core";
  other.peak_tflops_bf16 = 1;
  EXPECT_EQ(parse_attention_kernel(JsonReader(kj, "kernel.json"), other).fwd_full.front().tflops, 0.0924);
}

TEST_F(CalibrateFit, ObservationsAreComputeOpsPairsAndCalls) {
  const calibrate::Run& r = exact_runs_->front();
  const auto obs = observations(r, 0);
  int sends = 0, recvs = 0, compute = 0;
  for (const auto& op : r.schedule.ops) {
    sends += op.kind == schedule::OpKind::send;
    recvs += op.kind == schedule::OpKind::recv;
    compute += schedule::is_compute(op.kind);
  }
  EXPECT_EQ(sends, recvs);
  EXPECT_EQ(obs.size(), size_t(sends + compute));  // one per compute op and per pair; 2 ranks: no collective
}

TEST(CalibrateNoise, RecoversWithinABoundUnderSeededNoise) {
  const CostParams base = synth::params_of(synth::experiment("runtime-tiny-ring", synth::kNvswitchOnly));
  const CostParams truth = synth::truth_from(base);
  const auto runs = runs_for(truth, 0.05);  // every op's time x U(0.95, 1.05)
  const FitResult f = fit(ptrs(runs), base);
  EXPECT_LT(f.rms_rel_after, 0.05);
  EXPECT_NEAR(param(f, "cost.gemm_efficiency").fitted, 0.5, 0.05 * 0.5);
  EXPECT_NEAR(param(f, "cost.kernel_launch_us").fitted, 20, 0.1 * 20);
  EXPECT_NEAR(param(f, "cost.link_efficiency.nvlink").fitted, 0.6, 0.05 * 0.6);
  for (const ParamFit& p : f.params)
    if (p.ref.kind == ParamKind::kernel_rate && p.exercised) {
      EXPECT_NEAR(p.fitted, get(truth, p.ref), 0.05 * get(truth, p.ref)) << p.name;
      EXPECT_TRUE(std::isfinite(p.std_error) && p.std_error > 0) << p.name;
    }
  // And the step times it predicts stay within the noise.
  const Validation v = validate(ptrs(runs), base, f.fitted);
  EXPECT_LT(v.mape_after, 0.03);
  EXPECT_GT(v.mape_before, 0.1);
}

TEST(CalibrateErrors, NoRunsAndMixedMachinesAreRefused) {
  const CostParams base = synth::params_of(synth::experiment("runtime-tiny-ring", synth::kNvswitchOnly));
  EXPECT_THROW(fit(std::vector<const CalRun*>{}, base), ConfigError);
  CalRun r = synthetic_run("runtime-tiny-ring", {"workload.seq_len=2k"}, base);
  CostParams other = base;
  other.cluster.gpu.model = "H100-SXM5-80GB";
  try {
    fit(std::vector<const CalRun*>{&r}, other);
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("Xeon-AVX512-1core"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rm::calibrate
