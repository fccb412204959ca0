#include <random>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/config_error_of.hpp"
#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"

namespace rm {
namespace {

using ::testing::HasSubstr;

using rm::test::config_error_of;

TEST(Sizes, SuffixesAreBinary) {
  EXPECT_EQ(parse_size_text("512k", "x"), 524288);
  EXPECT_EQ(parse_size_text("1M", "x"), 1048576);
  EXPECT_EQ(parse_size_text("128K", "x"), 131072);
  EXPECT_EQ(parse_size_text("4096", "x"), 4096);
  EXPECT_THAT(config_error_of([] { parse_size_text("12q", "f.json: $.a"); }), HasSubstr("f.json: $.a: expected a size"));
  EXPECT_THAT(config_error_of([] { parse_size_text("k", "w"); }), HasSubstr("expected a size"));
}

TEST(Sizes, SuffixOverflowIsAnErrorNotAWrap) {
  // 17179869185G once wrapped to 1,073,741,824 tokens.
  EXPECT_THAT(config_error_of([] { parse_size_text("17179869185G", "w"); }), HasSubstr("w: size \"17179869185G\" is too large"));
  EXPECT_THAT(config_error_of([] { parse_size_text("8796093022208M", "w"); }), HasSubstr("too large"));
  EXPECT_EQ(parse_size_text("8589934591G", "w"), int64_t(8589934591) << 30);  // the largest that fits
}

TEST(UntrustedConfigs, ParallelProductIsCheckedIn64Bits) {
  // 65536 * 65536 overflows an int to 0, which once passed the GPU-count check.
  const std::string e = config_error_of([] {
    load_experiment(ConfigStore{}, "", {"parallel.dp=65536", "parallel.cp=65536", "parallel.partition=zigzag",
                                        "parallel.ring=ring"});
  });
  EXPECT_THAT(e, HasSubstr("dp*hp*cp = 65536*1*65536 = 4294967296 exceeds the 32 GPUs"));
}

TEST(UntrustedConfigs, SetValuesObeyTheJsonLimits) {
  EXPECT_THAT(config_error_of([] { load_experiment(ConfigStore{}, "", {R"(parallel={"cp": 8, "cp": 16})"}); }),
              HasSubstr("key \"cp\" appears twice"));
  // 1e999 is no JSON number a double holds, so --set keeps it as text and the field says what it expected.
  EXPECT_THAT(config_error_of([] { load_experiment(ConfigStore{}, "", {"workload.seed=1e999"}); }),
              HasSubstr("$.workload.seed: expected an integer, got \"1e999\""));
  EXPECT_THAT(config_error_of([] { parse_json_text(R"({"nodes": 1e999})", "c.json"); }),
              HasSubstr("c.json: a number is out of range"));
  EXPECT_THAT(config_error_of([] { load_experiment(ConfigStore{}, "", {"name=\xff\xfe"}); }),
              HasSubstr("the value is not valid UTF-8"));
  // Found by fuzz_set: a path key that is not UTF-8 made the error message itself throw.
  EXPECT_THAT(config_error_of([] { load_experiment(ConfigStore{}, "", {"workload.seed.see\x93=1"}); }),
              HasSubstr("the path is not valid UTF-8"));
  EXPECT_THAT(config_error_of([] { load_experiment(ConfigStore{}, "", {"cluster=/dev/zero"}); }),
              HasSubstr("$.cluster: /dev/zero: is a character device, expected a regular file"));
  EXPECT_THAT(config_error_of([] { load_experiment(ConfigStore{}, "", {"cluster=/tmp"}); }),
              HasSubstr("/tmp: is a directory"));
}

TEST(Reader, NamesFilePathAndExpectation) {
  auto j = nlohmann::json::parse(R"({"a": {"b": -3, "c": "x", "typo": 1}})");
  JsonReader r(j, "exp.json");
  auto a = r.object("a");
  EXPECT_THAT(config_error_of([&] { a.integer("b", 1, 10); }), HasSubstr("exp.json: $.a.b: expected an integer in [1, 10], got -3"));
  EXPECT_THAT(config_error_of([&] { a.number("c", 0, 1); }), HasSubstr("$.a.c: expected a number"));
  EXPECT_THAT(config_error_of([&] { a.str("missing"); }), HasSubstr("$.a.missing: missing required field"));
  EXPECT_THAT(config_error_of([&] { a.finish(); }), HasSubstr("$.a.typo: unknown key"));
  // A value built in code may hold bytes that are not UTF-8; the message shows them replaced.
  nlohmann::json bad = {{"n", {{"k\x93", 1}}}};
  EXPECT_THAT(config_error_of([&] { JsonReader(bad, "b.json").integer("n", 0, 1); }),
              HasSubstr("$.n: expected an integer, got {\"k\xEF\xBF\xBD\":1}"));
}

TEST(Configs, EveryShippedConfigLoads) {
  ConfigStore store;
  // Each parses to what its file says (the fields every other part reads), not just without an error.
  for (const auto& name : store.names("clusters")) {
    auto c = store.load("clusters", name, "test");
    const Cluster cl = parse_cluster(JsonReader(c.json, c.source));
    EXPECT_EQ(cl.name, c.json.at("name").get<std::string>()) << name;
    EXPECT_EQ(cl.nodes, c.json.at("nodes").get<int>()) << name;
    EXPECT_EQ(cl.gpus_per_node, c.json.at("gpus_per_node").get<int>()) << name;
    EXPECT_EQ(cl.gpus(), cl.nodes * cl.gpus_per_node) << name;
    EXPECT_EQ(cl.gpu.peak_tflops_bf16, c.json.at("gpu").at("peak_tflops_bf16").get<double>()) << name;
  }
  for (const auto& name : store.names("models")) {
    auto m = store.load("models", name, "test");
    const Model md = parse_model(JsonReader(m.json, m.source));
    EXPECT_EQ(md.name, m.json.at("name").get<std::string>()) << name;
    for (const auto& [key, field] : {std::pair{"layers", md.layers}, std::pair{"heads", md.heads},
                                     std::pair{"kv_heads", md.kv_heads}, std::pair{"head_dim", md.head_dim}})
      EXPECT_EQ(field, m.json.at(key).get<int>()) << name << " " << key;
  }
  // An experiment names its layout for its own cluster: it uses GPUs the cluster has.
  for (const auto& name : store.names("experiments")) {
    const Experiment e = load_experiment(store, name);
    const int64_t used = int64_t(e.parallel.dp) * e.parallel.tp * e.parallel.hp * e.parallel.cp;
    EXPECT_GE(used, 1) << name;
    EXPECT_LE(used, e.cluster.gpus()) << name;
    EXPECT_EQ(e.model.name, store.load("experiments", name, "test").json.at("model").get<std::string>()) << name;
  }
  for (const char* want : {"a100-40g-4x8-hdr", "a100-80g-8x8-hdr", "h100-8x8-ndr", "h200-1x8", "v100-dgx1-1x8"})
    EXPECT_NO_THROW(store.load("clusters", want, "test")) << want;
  for (const char* want : {"qwen2.5-3b", "llama3-8b", "llama2-7b", "llama2-7b-gqa"})
    EXPECT_NO_THROW(store.load("models", want, "test")) << want;
}

TEST(Configs, DefaultExperimentIsMTrainingSetup) {
  ConfigStore store;
  Experiment e = load_experiment(store, "");
  EXPECT_EQ(e.model.name, "qwen2.5-3b");
  EXPECT_EQ(e.model.layers, 36);
  EXPECT_EQ(e.model.heads, 16);
  EXPECT_EQ(e.model.kv_heads, 2);
  EXPECT_EQ(e.workload.seq_len, 524288);
  EXPECT_EQ(e.cluster.gpus(), 32);
  EXPECT_EQ(e.cluster.nodes, 4);
  EXPECT_EQ(e.parallel.cp, 32);
  EXPECT_EQ(e.parallel.partition, Partition::stripe);
  EXPECT_EQ(e.parallel.stripe_tokens, 128);
  EXPECT_EQ(e.parallel.ring, RingKind::hierarchical);
  EXPECT_DOUBLE_EQ(e.cluster.nic.bandwidth_GBps, 25.0);  // 200 Gb/s
  // The resolved experiment inlines everything it named.
  EXPECT_TRUE(e.resolved["cluster"].is_object());
  EXPECT_TRUE(e.resolved["workload"]["pattern"].is_object());
}

TEST(Configs, OverridesApplyInOrder) {
  ConfigStore store;
  Experiment e = load_experiment(store, "", {"workload.seq_len=128k", "parallel.cp=8", "parallel.partition=zigzag",
                                             "cluster.nodes=2", "parallel.ring=ring"});
  EXPECT_EQ(e.workload.seq_len, 131072);
  EXPECT_EQ(e.parallel.cp, 8);
  EXPECT_EQ(e.parallel.partition, Partition::zigzag);
  EXPECT_EQ(e.cluster.nodes, 2);  // the named cluster was inlined, then changed
  Experiment f = load_experiment(store, "", {"cluster=h100-8x8-ndr", "model=llama3-8b"});
  EXPECT_EQ(f.cluster.name, "h100-8x8-ndr");
  EXPECT_EQ(f.model.heads, 32);
}

TEST(Configs, BadInputNamesTheField) {
  ConfigStore store;
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.cp=64"}); }),
              HasSubstr("$.parallel.cp: dp*hp*cp = 1*1*64 = 64 exceeds the 32 GPUs"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"workload.pattern=nope"}); }),
              HasSubstr("unknown pattern \"nope\""));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.stripe_tokens=100"}); }),
              HasSubstr("stripe partition needs workload.seq_len divisible by 3200"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.colour=red"}); }),
              HasSubstr("$.parallel.colour: unknown key"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.ring=spiral"}); }),
              HasSubstr("$.parallel.ring: expected one of ring, double_ring, hierarchical"));
  // A mistyped key is answered with the nearest key the reader knows.
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.partiton=zigzag"}); }),
              HasSubstr("$.parallel.partiton: unknown key (did you mean \"partition\"?)"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"workload.seq_length=128k"}); }),
              HasSubstr("(did you mean \"seq_len\"?)"));
  // Ulysses is head parallelism, not a ring kind: the error says how to ask for it.
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.ring=ulysses"}); }),
              HasSubstr("$.parallel.ring: ulysses is not a ring kind: Ulysses (all-to-all) is parallel.hp > 1 with "
                        "parallel.cp = 1"));
  // A cp that does not divide the sequence is named as cp, not as the stripe width.
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.cp=24"}); }),
              HasSubstr("$.parallel.cp: each context rank holds workload.seq_len/(cp*hp) tokens: expected cp*hp to "
                        "divide 524288, got cp*hp = 24*1"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"cluster.gpu.memory_GB=\"lots\""}); }),
              HasSubstr("$.gpu.memory_GB: expected a number"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "/nonexistent/exp.json"); }),
              HasSubstr("/nonexistent/exp.json\" not found"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"nonsense"}); }), HasSubstr("expected path=value"));
  EXPECT_THAT(config_error_of([&] { load_experiment(store, "", {"parallel.cp=8", "parallel.hp=3"}); }),
              HasSubstr("$.parallel.hp: expected a divisor of the model's 16 heads"));
}

TEST(Configs, AMissingConfigFolderIsAnError) {
  EXPECT_THAT(config_error_of([] { ConfigStore({"/no/such/rm-configs"}); }), HasSubstr("\"/no/such/rm-configs\""));
  EXPECT_EQ(config_error_of([] { ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}); }), "(no error)");
}

// The echoed experiment names every key with its value after defaults: set
// back as overrides on the default experiment, it resolves to itself. Random
// settings (the invalid ones skipped) cover every name of every enum table.
TEST(Configs, SummaryRoundTripsThroughOverrides) {
  const ConfigStore store;
  std::mt19937 rng(7);
  auto pick = [&](std::vector<std::string> v) { return v[rng() % v.size()]; };
  int valid = 0;
  for (int i = 0; i < 200; ++i) {
    const std::vector<std::string> sets{
        "cluster=" + pick({"h200-1x8", "a100-40g-4x8-hdr", "h100-8x8-ndr"}),
        "model=" + pick({"qwen2.5-3b", "llama3-8b"}),
        "workload.seq_len=" + pick({"64k", "96k", "128k"}),
        "workload.batch=" + pick({"1", "2"}),
        "workload.pattern=" + pick({"dense-causal", "sliding-window", "topp-synthetic"}),
        "parallel.dp=" + pick({"1", "2"}),
        "parallel.hp=" + pick({"1", "2", "4"}),
        "parallel.cp=" + pick({"1", "2", "4", "8"}),
        "parallel.partition=" + pick({"contiguous", "zigzag", "stripe", "balanced"}),
        "parallel.stripe_tokens=" + pick({"64", "128", "256"}),
        "parallel.ring=" + pick({"ring", "double_ring", "hierarchical"}),
        "parallel.window=" + pick({"1", "2", "4"}),
        "parallel.placement=" + pick({"head_first", "context_first", "interleaved"}),
        "parallel.checkpoint=" + pick({"none", "full", "selective"}),
        "parallel.zero_stage=" + pick({"0", "1", "2", "3"}),
        "scope=" + pick({"attention_fwd", "attention_fwd_bwd", "layer", "step"})};
    Experiment e;
    try {
      e = load_experiment(store, "", sets);
    } catch (const ConfigError&) {
      continue;
    }
    ++valid;
    const nlohmann::json echo = summary_json(e);
    std::vector<std::string> back{"cluster=" + echo["cluster"].get<std::string>(),
                                  "model=" + echo["model"].get<std::string>(),
                                  "scope=" + echo["scope"].get<std::string>()};
    for (const char* part : {"workload", "parallel"})
      for (const auto& [k, v] : echo[part].items())
        back.push_back(std::string(part) + "." + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    EXPECT_EQ(summary_json(load_experiment(store, "", back)), echo) << testing::PrintToString(sets);
    EXPECT_EQ(echo["gpus_used"].get<int>(), e.parallel.dp * e.parallel.hp * e.parallel.cp);
    EXPECT_EQ(echo["gpus_in_cluster"].get<int>(), e.cluster.gpus());
  }
  EXPECT_GT(valid, 20);
  // Every parallel key the default experiment file sets is echoed.
  const Experiment d = load_experiment(store, "");
  for (const auto& [k, v] : d.resolved.at("parallel").items())
    EXPECT_TRUE(summary_json(d).at("parallel").contains(k)) << k;
}

}  // namespace
}  // namespace rm
