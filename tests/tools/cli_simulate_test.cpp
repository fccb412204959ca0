#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// Small enough to run in a second: one 8-GPU node, 16K tokens, attention only.
const std::string kSmall =
    " --set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set workload.seq_len=16k"
    " --set scope=attention_fwd_bwd";

TEST(CliSimulate, JsonHasTheStableKeys) {
  auto r = run_cli("simulate --json" + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"step_time_s", "tokens_per_s", "mfu", "hfu", "dense_equivalent_speedup", "flops", "breakdown",
                        "imbalance", "critical_path", "experiment"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["step_time_s"].get<double>(), 0);
  EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
  EXPECT_GE(j["imbalance"]["worker"].get<double>(), 1.0 - 1e-9);
  EXPECT_GE(j["imbalance"]["step"].get<double>(), j["imbalance"]["worker"].get<double>() - 1e-9);
  // Utilisations are fractions; the sparse default pattern is a speed-up over dense causal.
  EXPECT_GT(j["mfu"].get<double>(), 0);
  EXPECT_LE(j["mfu"].get<double>(), j["hfu"].get<double>());
  EXPECT_LT(j["hfu"].get<double>(), 1);
  EXPECT_GT(j["dense_equivalent_speedup"].get<double>(), 1);
}

TEST(CliSimulate, EchoesTheResolvedExperimentAndUnusedGpus) {
  const std::string sets =
      " --set cluster=h200-1x8 --set parallel.cp=2 --set parallel.hp=2 --set parallel.partition=zigzag"
      " --set parallel.ring=double_ring --set parallel.window=2 --set parallel.checkpoint=selective"
      " --set workload.seq_len=8k --set workload.batch=2 --set workload.pattern=sliding-window --set scope=layer";
  auto r = run_cli("simulate --json" + sets);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto e = nlohmann::json::parse(r.out).at("experiment");
  EXPECT_EQ(e.at("name"), "mtraining-qwen2.5-3b-512k");
  EXPECT_EQ(e.at("cluster"), "h200-1x8");
  EXPECT_EQ(e.at("model"), "qwen2.5-3b");
  EXPECT_EQ(e.at("scope"), "layer");
  EXPECT_EQ(e.at("workload"), nlohmann::json({{"seq_len", 8192}, {"batch", 2}, {"pattern", "sliding-window"},
                                              {"block_q", 128}, {"block_k", 64}, {"seed", 1}}));
  EXPECT_EQ(e.at("parallel"),
            nlohmann::json({{"dp", 1}, {"tp", 1}, {"hp", 2}, {"cp", 2}, {"partition", "zigzag"}, {"stripe_tokens", 128},
                            {"ring", "double_ring"}, {"window", 2}, {"placement", "head_first"},
                            {"checkpoint", "selective"}, {"zero_stage", 1},
                             {"shuffle", "per_call"}, {"grad_comm_dtype", "fp32"}, {"ring_order", "rank"},
                             {"loss_chunk_tokens", 1024}}));
  EXPECT_EQ(e.at("scope_layer"), 0);
  EXPECT_EQ(e.at("gpus_used"), 4);
  EXPECT_EQ(e.at("gpus_in_cluster"), 8);
  auto text = run_cli("simulate" + sets);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("uses 4 of the cluster's 8 GPUs"));
  EXPECT_THAT(text.out, HasSubstr("ring=double_ring"));
  EXPECT_THAT(text.out, HasSubstr("checkpoint=selective"));
  // All GPUs used: no such line.
  auto all = run_cli("simulate --set cluster=h200-1x8 --set parallel.cp=8 --set workload.seq_len=8k"
                     " --set workload.pattern=dense-causal --set scope=attention_fwd");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, ::testing::Not(HasSubstr("GPUs (dp*tp*hp*cp)")));
}

// Layers of the default pattern differ in sparsity (layer 0 is the densest):
// scope_layer picks which one the narrow scopes simulate.
TEST(CliSimulate, ScopeLayerPicksTheLayer) {
  auto flops = [](int layer) {
    auto r = run_cli("simulate --json" + kSmall + " --set scope_layer=" + std::to_string(layer));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("experiment").at("scope_layer"), layer);
    return j.at("flops").at("model").get<double>();
  };
  const double l0 = flops(0), l1 = flops(1);
  EXPECT_LT(l1, 0.5 * l0);  // topp-synthetic: layer 1 keeps a few percent, layer 0 about an eighth
  auto bad = run_cli("simulate" + kSmall + " --set scope_layer=36");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("scope_layer"));
}

TEST(CliSimulate, TraceIsChromeJsonAndDeterministic) {
  const auto dir = temp_dir("rm_cli_trace");
  auto a = run_cli("simulate" + kSmall + " --trace a.json", dir.string());
  auto b = run_cli("simulate" + kSmall + " --trace b.json", dir.string());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string ta = slurp((dir / "a.json").string()), tb = slurp((dir / "b.json").string());
  EXPECT_EQ(ta, tb);
  auto j = nlohmann::json::parse(ta);
  ASSERT_TRUE(j.contains("traceEvents"));
  int complete = 0;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] != "X") continue;
    ++complete;
    EXPECT_TRUE(ev.contains("pid") && ev.contains("tid") && ev.contains("ts") && ev.contains("dur"));
    EXPECT_TRUE(ev["args"].contains("op"));
  }
  EXPECT_GT(complete, 8 * 8);  // at least one attention op per rank per ring step
  std::filesystem::remove_all(dir);
}

// Without --trace, simulate reports from the engine's op times and builds no
// Timeline (pipeline::WithTimeline::no), or (by default, analytic) streams the
// step; with it, from the Timeline it writes. The printed report must not depend
// on which: JSON and table, byte for byte, but for the line that says it streamed.
TEST(CliSimulate, TheReportIsTheSameWithAndWithoutATrace) {
  const auto dir = temp_dir("rm_cli_notrace");
  // streams: whether the default (--stream auto) streams it.
  struct Case {
    std::string sets;
    bool streams;
  };
  for (const auto& [sets, streams] : std::vector<Case>{
           {kSmall, true},
           {kSmall + " --engine simgrid", false},
           {kSmall + " --set parallel.partition=stripe --set parallel.ring=hierarchical", true},
           {" --set cluster=h200-1x8 --set parallel.cp=4 --set parallel.hp=2 --set workload.seq_len=16k"
            " --set model.layers=2 --set scope=step",
            true},
           {" --set cluster.nodes=2 --set parallel.cp=4 --set parallel.dp=4 --set parallel.zero_stage=3"
            " --set workload.seq_len=16k --set model.layers=2 --set scope=step",
            true},
           // The data-parallel shortcut asked for where it is not exact (replicas
           // straddle the two nodes, so a route's translates are not its copies): the
           // streamed run meets such a route as it first uses it and leaves the full
           // step to the whole run, which refuses the shortcut before it starts: the
           // same output as --stream off.
           {" --set cluster.nodes=2 --set parallel.cp=4 --set parallel.dp=4 --set parallel.zero_stage=3"
            " --set workload.seq_len=16k --set model.layers=2 --set scope=step --symmetry dp",
            false},
           {" --set cluster.nodes=2 --set parallel.cp=2 --set parallel.dp=8 --set parallel.zero_stage=1"
            " --set workload.seq_len=16k --set model.layers=2 --set scope=step --symmetry dp",
            false},
           // The shortcut where it holds (a replica per node): one replica simulated, its
           // spanning gradient collectives planned for every member on every path.
           {" --set workload.seq_len=16k --set model.layers=2 --set scope=step --set parallel.dp=4"
            " --set parallel.cp=8 --symmetry dp",
            true},
           {" --set cluster.nodes=2 --set parallel.cp=2 --set parallel.dp=8 --set parallel.zero_stage=1"
            " --set workload.seq_len=16k --set model.layers=2 --set scope=step --symmetry dp --engine simgrid",
            false}}) {
    for (const std::string& form : {std::string(" --json"), std::string("")}) {
      const auto plain = run_cli("simulate --stream off" + form + sets, dir.string());
      const auto traced = run_cli("simulate" + form + sets + " --trace t.json", dir.string());
      auto streamed = run_cli("simulate" + form + sets, dir.string());
      ASSERT_EQ(plain.exit_code, 0) << sets << ": " << plain.err;
      ASSERT_EQ(traced.exit_code, 0) << sets << ": " << traced.err;
      ASSERT_EQ(streamed.exit_code, 0) << sets << ": " << streamed.err;
      if (form.empty()) {
        const auto at = streamed.out.find("\nstreamed: generated and simulated in ");
        ASSERT_EQ(at != std::string::npos, streams) << sets;
        if (streams) streamed.out.erase(at + 1, streamed.out.find("\n\n", at + 1) - at + 1);
      } else {
        auto j = nlohmann::json::parse(streamed.out);
        ASSERT_EQ(j.erase("streamed"), streams ? 1u : 0u) << sets;
        streamed.out = j.dump(2) + "\n";
      }
      std::string expect = traced.out;
      if (form.empty()) {  // the table's last line names the trace file
        const auto at = expect.find("\nTimeline written to");
        ASSERT_NE(at, std::string::npos) << expect;
        expect.erase(at, expect.find('\n', at + 1) - at + 1);
      } else {  // so does the JSON's "trace" key; every other value is printed as it was read
        auto j = nlohmann::json::parse(expect);
        ASSERT_EQ(j.erase("trace"), 1u);
        expect = j.dump(2) + "\n";
      }
      EXPECT_TRUE(plain.out == expect) << sets << form;  // (not EXPECT_EQ: the outputs are long)
      EXPECT_TRUE(streamed.out == expect) << sets << form << " (streamed)";
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(CliSimulate, ScheduleFileRoundTripGivesTheSameStep) {
  const auto dir = temp_dir("rm_cli_sched");
  auto w = run_cli("schedule --json -o step.json.gz" + kSmall, dir.string());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_GT(nlohmann::json::parse(w.out)["ops"].get<int>(), 0);
  auto direct = run_cli("simulate --json" + kSmall);
  auto replay = run_cli("simulate --json --schedule step.json.gz", dir.string());
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(direct.out)["step_time_s"].get<double>(),
                   nlohmann::json::parse(replay.out)["step_time_s"].get<double>());
  std::filesystem::remove_all(dir);
}

TEST(CliSimulate, SimgridAgreesWithAnalyticOnOneNode) {
  auto a = run_cli("simulate --json --engine analytic" + kSmall);
  auto s = run_cli("simulate --json --engine simgrid" + kSmall);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const double ta = nlohmann::json::parse(a.out)["step_time_s"], ts = nlohmann::json::parse(s.out)["step_time_s"];
  // NVSwitch ring: every transfer has its own links, so only sharing inside a GPU differs.
  EXPECT_NEAR(ts / ta, 1.0, 0.05);
}

TEST(CliSimulate, BadScheduleFilesAreRefused) {
  const auto dir = temp_dir("rm_cli_badsched");
  auto w = run_cli("schedule -o good.json" + kSmall, dir.string());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string good = slurp((dir / "good.json").string());
  std::ofstream((dir / "cut.json").string()) << good.substr(0, good.size() / 2);
  auto cut = run_cli("simulate --schedule cut.json", dir.string());
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_THAT(cut.err, HasSubstr("cut.json"));
  auto j = nlohmann::json::parse(good);
  j["version"] = 99;
  std::ofstream((dir / "v99.json").string()) << j.dump();
  auto v99 = run_cli("simulate --schedule v99.json", dir.string());
  EXPECT_NE(v99.exit_code, 0);
  EXPECT_THAT(v99.err, HasSubstr("version"));
  // A rank on a GPU outside the cluster once read out of bounds in the engine;
  // two ranks on one GPU were silently accepted.
  auto far = nlohmann::json::parse(good);
  far["ranks"][2]["gpu"] = 2147483647;
  std::ofstream((dir / "far.json").string()) << far.dump();
  auto outside = run_cli("simulate --schedule far.json", dir.string());
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_THAT(outside.err, HasSubstr("far.json: ranks[2].gpu: GPU 2147483647 is outside cluster h200-1x8 (GPUs 0..7)"));
  auto twice = nlohmann::json::parse(good);
  twice["ranks"][3]["gpu"] = twice["ranks"][1]["gpu"];
  std::ofstream((dir / "twice.json").string()) << twice.dump();
  auto shared = run_cli("simulate --schedule twice.json", dir.string());
  EXPECT_EQ(shared.exit_code, 2);
  EXPECT_THAT(shared.err, HasSubstr("twice.json: ranks[3].gpu: GPU 1 already holds rank 1"));
  auto both = run_cli("simulate --schedule good.json --set parallel.cp=4", dir.string());
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.err, HasSubstr("--schedule"));
  auto engine = run_cli("simulate --engine quantum" + kSmall);
  EXPECT_NE(engine.exit_code, 0);
  EXPECT_THAT(engine.err, HasSubstr("--engine: expected analytic or simgrid"));
  for (const auto* r : {&cut, &v99, &outside, &shared, &both, &engine}) EXPECT_EQ(r->out, "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rm::test
