// The attention kernel table (configs/kernels/, kernel.attention): its lookup
// and interpolation, which entry each call picks, what work each kind of
// kernel is charged, and the errors bad tables and bad choices give.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "sim/config/attention_kernel.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/kernel_rate.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace rm::cost {
namespace {

using schedule::OpKind;

ConfigStore store() { return ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}); }

Cluster cluster(const std::string& name) {
  auto c = store().load("clusters", name, "test");
  return parse_cluster(JsonReader(c.json, c.source));
}

// A table whose four curves are told apart by value: fwd full 100..200, fwd
// causal 80, bwd full 60, bwd causal 50 (TFLOP/s).
nlohmann::json table(const std::string& work) {
  return nlohmann::json::parse(R"({"name": "t", "work": ")" + work + R"(", "gpus": [
    {"models": ["other-gpu"], "source": "s", "fwd_tflops": {"full": [[1, 900]], "causal": [[1, 900]]},
     "bwd_tflops": {"full": [[1, 900]], "causal": [[1, 900]]}},
    {"models": ["A100-SXM4-40GB"], "source": "hand values",
     "fwd_tflops": {"full": [[1024, 100], [4096, 200]], "causal": [[1024, 80]]},
     "bwd_tflops": {"full": [[1024, 60]], "causal": [[1024, 50]]}}]})");
}

AttentionKernel parse(const nlohmann::json& j, const Cluster& c) { return parse_attention_kernel(JsonReader(j, "t.json"), c.gpu); }

std::string error_of(const nlohmann::json& j, const Cluster& c) {
  try {
    parse(j, c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelRate, InterpolatesLinearlyInLogTokensAndClampsAtTheEnds) {
  const RateCurve c{{1024, 100}, {4096, 200}, {16384, 150}};
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 1024), 100);
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 2048), 150);  // half way in log2: 10 -> 12
  EXPECT_NEAR(interpolate_tflops(c, 1024 * std::pow(2.0, 0.5)), 125, 1e-9);
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 4096), 200);
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 8192), 175);  // the falling segment too
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 100), 100);   // below the first point: clamped
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 0), 100);
  EXPECT_DOUBLE_EQ(interpolate_tflops(c, 1 << 20), 150);  // above the last point: clamped
  EXPECT_DOUBLE_EQ(interpolate_tflops({{512, 42}}, 1e6), 42);  // one point: flat
}

TEST(KernelTable, DirectionAndMaskPickTheirOwnCurveForTheClustersGpu) {
  const Cluster c = cluster("a100-40g-4x8-hdr");
  const CostModel m(c, parse(table("allowed_pairs"), c));
  EXPECT_EQ(m.kernel().source, "hand values");  // the entry listing the cluster's GPU, not the first
  EXPECT_DOUBLE_EQ(m.attention_tflops(false, false, 2048), 150);
  EXPECT_DOUBLE_EQ(m.attention_tflops(false, true, 2048), 80);
  EXPECT_DOUBLE_EQ(m.attention_tflops(true, false, 2048), 60);
  EXPECT_DOUBLE_EQ(m.attention_tflops(true, true, 2048), 50);
  // The shipped tables tell causal from full and forward from backward too.
  for (const char* name : {"fa2", "block_sparse"}) {
    const CostModel s(c, load_attention_kernel(store(), name, c.gpu));
    std::set<double> rates;
    for (bool bwd : {false, true})
      for (bool causal : {false, true}) rates.insert(s.attention_tflops(bwd, causal, 16384));
    EXPECT_EQ(rates.size(), 4u) << name;
  }
}

TEST(KernelTable, DenseKernelsChargeAllowedPairsTileKernelsChargeExecutedTiles) {
  const Cluster c = cluster("a100-40g-4x8-hdr");  // launch 5 us
  const CostModel dense(c, parse(table("allowed_pairs"), c));
  const CostModel tiles(c, parse(table("tiles"), c));
  const double per_tile = 4.0 * 128 * 64 * 128;  // attention_cost.hpp, tile 128 x 64, d = 128
  const double flops = 0.1 * 1000 * per_tile;     // tiles a tenth full
  const AttentionCall fwd{flops, 1000, false, false, 1024};
  EXPECT_NEAR(dense.attention_seconds(fwd), 5e-6 + flops / 100e12, 1e-15);
  EXPECT_NEAR(tiles.attention_seconds(fwd), 5e-6 + 1000 * per_tile / 100e12, 1e-15);
  const AttentionCall bwd{2.5 * flops, 1000, true, true, 1024};
  EXPECT_NEAR(dense.attention_seconds(bwd), 5e-6 + 2.5 * flops / 50e12, 1e-15);
  EXPECT_NEAR(tiles.attention_seconds(bwd), 5e-6 + 2.5 * 1000 * per_tile / 50e12, 1e-15);
  // Allowed pairs above the tile count (a coarse count): the larger is paid.
  EXPECT_NEAR(tiles.attention_seconds({2000 * per_tile, 1000, false, false, 1024}), 5e-6 + 2000 * per_tile / 100e12,
              1e-15);
  EXPECT_DOUBLE_EQ(tiles.attention_seconds({0, 0, false, true, 1024}), 5e-6);  // an empty call: the launch
}

// Off the diagonal, a causal mask that cuts the call's tiles (a stripe narrower
// than a tile) makes a dense kernel run causal; whole tiles run full. A tile
// kernel (MTraining's) keeps its causal mask for the diagonal call only.
TEST(KernelTable, DenseKernelsRunCausalWhereTheMaskCutsTheirTiles) {
  const Cluster c = cluster("a100-40g-4x8-hdr");  // launch 5 us; fwd full 100 at 1024, causal 80
  const CostModel dense(c, parse(table("allowed_pairs"), c));
  const CostModel tiles(c, parse(table("tiles"), c));
  const double per_tile = 4.0 * 128 * 64 * 128;
  const AttentionCall cut{0.5 * 1000 * per_tile, 1000, false, false, 1024, true};
  const AttentionCall whole{1000 * per_tile, 1000, false, false, 1024, true};
  AttentionCall unmasked = cut;
  unmasked.causal_mask = false;
  EXPECT_NEAR(dense.attention_seconds(cut), 5e-6 + cut.flops / 80e12, 1e-15);
  EXPECT_NEAR(dense.attention_seconds(whole), 5e-6 + whole.flops / 100e12, 1e-15);
  EXPECT_NEAR(dense.attention_seconds(unmasked), 5e-6 + unmasked.flops / 100e12, 1e-15);
  EXPECT_NEAR(tiles.attention_seconds(cut), 5e-6 + 1000 * per_tile / 100e12, 1e-15);
}

TEST(KernelTable, AttentionCallReadsMaskAndTokensOffTheDescriptor) {
  schedule::Schedule s;
  s.token_sets = {{{{0, 128, 512, 4}}}, {{{128, 128, 512, 4}}}};  // two ranks' stripes, 512 tokens each
  s.attentions = {{0, 0, 0, 2, 0, 1, schedule::Mask::causal}, {0, 1, 0, 2, 0, 1, schedule::Mask::causal},
                  {1, 0, 0, 2, 0, 1, schedule::Mask::full}};
  schedule::Op op;
  op.kind = OpKind::attn_fwd;
  const auto call = [&](int detail) {
    s.set_desc(op, {0.0, 0, 7, 0, -1, detail});
    return CostModel::attention_call(s, op);
  };
  EXPECT_TRUE(call(0).causal);   // the diagonal call
  EXPECT_FALSE(call(1).causal);  // another rank's keys: whole tiles, the kernel's causal flag off
  EXPECT_FALSE(call(2).causal);
  EXPECT_EQ(call(0).tokens, 512);
  EXPECT_TRUE(call(-1).causal);  // no descriptor: causal, the op's tokens
  EXPECT_EQ(call(-1).tokens, 7);
}

// Every attention op of a dense ring, priced with fa2 and with fa3.
TEST(KernelTable, SwitchingFa2ToFa3ScalesAttentionOpsByTheRatioOfTheirEntries) {
  const std::vector<std::string> base{"cluster=h100-8x8-ndr", "workload.pattern=dense-causal", "workload.seq_len=16k",
                                      "parallel.cp=8", "parallel.ring=ring", "parallel.partition=zigzag",
                                      "scope=attention_fwd_bwd"};
  auto with = [&](const char* kernel) {
    auto o = base;
    o.push_back(std::string("kernel.attention=") + kernel);
    return load_experiment(store(), "", o);
  };
  const Experiment e2 = with("fa2"), e3 = with("fa3");
  const schedule::Schedule s = pipeline::Session().schedule(e2);
  const CostModel m2 = CostModel::for_experiment(e2), m3 = CostModel::for_experiment(e3);
  const double launch = e2.cluster.cost.kernel_launch_us * 1e-6;
  std::set<std::pair<bool, bool>> seen;  // (backward, causal)
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::attn_fwd && op.kind != OpKind::attn_bwd) continue;
    if (s.desc(op).flops <= 0) continue;
    const AttentionCall a = CostModel::attention_call(s, op);
    const double want = m2.attention_tflops(a.backward, a.causal, a.tokens) / m3.attention_tflops(a.backward, a.causal, a.tokens);
    EXPECT_NEAR((m3.compute_seconds(s, op) - launch) / (m2.compute_seconds(s, op) - launch), want, 1e-12)
        << schedule::describe(s, op.id);
    seen.insert({a.backward, a.causal});
  }
  EXPECT_EQ(seen.size(), 4u);  // forward and backward, diagonal and other steps
  // By hand, the diagonal forward call (2048 tokens): fa2 298 TFLOP/s, fa3 521 (FA3 paper Fig. 5d, the tables' 2K points).
  EXPECT_DOUBLE_EQ(m2.attention_tflops(false, true, 2048) / m3.attention_tflops(false, true, 2048), 298.0 / 521.0);
}

TEST(KernelTable, ExperimentsNameTheirKernelElseGetTheDefaultOfMaskAndGpu) {
  EXPECT_EQ(load_experiment(store(), "").kernel.name, "block_sparse");
  EXPECT_EQ(load_experiment(store(), "").kernel_choice, "named by the experiment");
  EXPECT_EQ(load_experiment(store(), "loongtrain-llama2-7b-1m").kernel.name, "fa2");
  auto j = store().load("experiments", "mtraining-qwen2.5-3b-512k", "test").json;
  j.erase("kernel");
  // A vertical-slash mask on A100s: MTraining's block-sparse kernel.
  const Experiment vs = parse_experiment(j, "x.json", "", store());
  EXPECT_EQ(vs.kernel.name, "block_sparse");
  EXPECT_NE(vs.kernel_choice.find("vertical_slash mask on ampere"), std::string::npos) << vs.kernel_choice;
  // Dense and document masks: FlashAttention-2 on Ampere, FlashAttention-3 on Hopper.
  for (const char* pattern : {"dense-causal", "document-causal", "sliding-window"}) {
    auto d = j;
    d["workload"]["pattern"] = pattern;
    EXPECT_EQ(parse_experiment(d, "x.json", "", store()).kernel.name, "fa2") << pattern;
    d["cluster"] = "h100-8x8-ndr";
    EXPECT_EQ(parse_experiment(d, "x.json", "", store()).kernel.name, "fa3") << pattern;
  }
  auto cpu = store().load("experiments", "runtime-tiny-sparse", "test").json;
  cpu.erase("kernel");
  EXPECT_EQ(parse_experiment(cpu, "x.json", "", store()).kernel.name, "cpu_reference");
  EXPECT_EQ(summary_json(load_experiment(store(), "", {"kernel.attention=fa2", "workload.pattern=dense-causal"}))
                .at("kernel")
                .at("attention"),
            "fa2");
}

TEST(KernelTable, AGpuOfNoKnownGenerationNeedsANamedKernel) {
  auto j = store().load("experiments", "rfa-llama3-8b-64k-a100", "test").json;
  j.erase("kernel");
  j["cluster"] = store().load("clusters", "a100-80g-1x8", "test").json;
  j["cluster"]["gpu"].erase("arch");
  try {
    (void)parse_experiment(j, "x.json", "", store());
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("$.gpu.arch: missing"), std::string::npos) << e.what();
  }
  j["kernel"] = {{"attention", "fa2"}};
  EXPECT_EQ(parse_experiment(j, "x.json", "", store()).kernel.name, "fa2");
  j["cluster"] = "v100-dgx1-1x8";
  j.erase("kernel");
  try {
    (void)parse_experiment(j, "x.json", "", store());
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no attention kernel is shipped for volta GPUs"), std::string::npos)
        << e.what();
  }
}

TEST(KernelTable, ADenseMaskOnTheBlockSparseKernelWarnsOnce) {
  const Experiment dense = load_experiment(store(), "", {"workload.pattern=dense-causal"});
  ASSERT_EQ(dense.warnings.size(), 1u);
  EXPECT_NE(dense.warnings[0].find("--set kernel.attention=fa2"), std::string::npos) << dense.warnings[0];
  EXPECT_TRUE(load_experiment(store(), "").warnings.empty());  // vertical-slash on block_sparse: its kernel
  EXPECT_TRUE(load_experiment(store(), "", {"workload.pattern=dense-causal", "kernel.attention=fa2"}).warnings.empty());
}

std::string load_error(const std::vector<std::string>& overrides) {
  try {
    const Experiment e = load_experiment(store(), "", overrides);
    pipeline::build_patterns(e);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelTable, BadChoicesGiveOneLineErrorsNamingTheKey) {
  for (const auto& [overrides, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"kernel.attention=fa9"}, "kernel.attention: unknown kernel \"fa9\""},
           {{"kernel.attention=fa3"}, "kernel.attention, cluster a100-40g-4x8-hdr): $.gpus: no entry for GPU A100-SXM4-40GB"},
           {{"kernel.attention=fa2"}, "$.kernel.attention: fa2 is a dense kernel"},
           {{"kernel.attention=7"}, "kernel.attention: expected a kernels name or an inline object"},
           {{"kernel.attention.work=some"}, "$.work: expected one of"},
           {{"kernel.flavour=x"}, "$.kernel.flavour: unknown key"}}) {
    const std::string err = load_error(overrides);
    EXPECT_NE(err.find(want), std::string::npos) << overrides[0] << " -> " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  // A dense kernel runs dense masks.
  EXPECT_EQ(load_error({"kernel.attention=fa2", "workload.pattern=dense-causal", "workload.seq_len=16k"}), "");
}

TEST(KernelTable, BadTablesNameFileAndField) {
  const Cluster c = cluster("a100-40g-4x8-hdr");
  auto bad = [&](auto edit) {
    nlohmann::json j = table("tiles");
    edit(j["gpus"][1]);
    return error_of(j, c);
  };
  EXPECT_NE(bad([](auto& g) { g["fwd_tflops"]["full"] = {{4096, 100}, {1024, 200}}; })
                .find("t.json: $.gpus[1].fwd_tflops.full[1]: expected tokens above the previous point's 4096"),
            std::string::npos);
  EXPECT_NE(bad([](auto& g) { g["bwd_tflops"]["causal"] = {{1024, 400}}; })
                .find("$.gpus[1].bwd_tflops.causal[0]: expected at most the A100-SXM4-40GB's peak of 312"),
            std::string::npos);
  EXPECT_NE(bad([](auto& g) { g["fwd_tflops"]["causal"] = nlohmann::json::array(); })
                .find("$.gpus[1].fwd_tflops.causal: expected a non-empty array of [tokens, tflops] pairs"),
            std::string::npos);
  EXPECT_NE(bad([](auto& g) { g.erase("source"); }).find("$.gpus[1].source"), std::string::npos);
  EXPECT_NE(bad([](auto& g) { g["models"] = {"H100-SXM5-80GB"}; })
                .find("$.gpus: no entry for GPU A100-SXM4-40GB (entries for: other-gpu, H100-SXM5-80GB)"),
            std::string::npos);
  EXPECT_NE(bad([](auto& g) { g["fwd_tflops"]["ful"] = {{1, 1}}; }).find("ful"), std::string::npos);
}

}  // namespace
}  // namespace rm::cost
