// The memory estimate's op count (generate/footprint.hpp) against generated
// Schedules: on many small configurations (dp, hp, cp, ring kind, window,
// partition, shuffle, scope, checkpoint, ZeRO stage, dense / static / dynamic
// patterns) count_step_ops(e) is the generator's op count exactly, hence an
// upper bound; the byte estimate grows with the ops and the machine's memory
// can be overridden.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace rm::generate {
namespace {

Experiment load(std::vector<std::string> sets) {
  std::vector<std::string> all{"workload.seq_len=16384", "model.layers=2"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_experiment(ConfigStore{}, "", all);
}

// A deterministic spread over the generator's choices (xorshift; no clock).
struct Pick {
  uint64_t s;
  int operator()(int n) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return int(s % uint64_t(n));
  }
};

TEST(Footprint, OpCountIsTheGeneratorsOnManyConfigurations) {
  const char* rings[] = {"ring", "double_ring", "hierarchical"};
  const char* partitions[] = {"contiguous", "zigzag", "stripe", "balanced"};
  const char* scopes[] = {"attention_fwd", "attention_fwd_bwd", "layer", "step"};
  const char* checkpoints[] = {"none", "full", "selective"};
  const char* patterns[] = {"dense-causal", "topp-synthetic", "qwen2.5-3b-static", "document-causal", "sliding-window"};
  const char* shuffles[] = {"per_call", "once"};
  const int dims[][3] = {{1, 1, 1}, {1, 1, 2}, {1, 1, 4}, {2, 1, 4}, {1, 2, 4}, {2, 2, 2}, {1, 1, 8},  {1, 1, 16},
                         {2, 1, 16}, {1, 2, 16}, {4, 1, 8}, {1, 4, 8}, {4, 2, 4}, {1, 8, 1}, {32, 1, 1}, {1, 1, 32}};
  Pick pick{0x9e3779b97f4a7c15ull};
  pipeline::Session session;
  int checked = 0, refused = 0;
  for (int i = 0; i < 120; ++i) {
    const auto& d = dims[pick(int(std::size(dims)))];
    const std::string ring = rings[pick(3)];
    std::vector<std::string> sets{
        "parallel.dp=" + std::to_string(d[0]), "parallel.hp=" + std::to_string(d[1]),
        "parallel.cp=" + std::to_string(d[2]), "parallel.ring=" + ring,
        std::string("parallel.partition=") + partitions[pick(4)], std::string("scope=") + scopes[pick(4)],
        std::string("parallel.checkpoint=") + checkpoints[pick(3)], "parallel.zero_stage=" + std::to_string(pick(4)),
        std::string("workload.pattern=") + patterns[pick(5)], std::string("parallel.shuffle=") + shuffles[pick(2)],
        "scope_layer=" + std::to_string(pick(2))};
    if (ring == "double_ring") sets.push_back("parallel.window=" + std::to_string(d[2] >= 4 ? 2 << pick(2) : 1));
    Experiment e;
    schedule::Schedule s;
    try {
      e = load(sets);
      s = session.schedule(e);
    } catch (const ConfigError&) {  // not a layout the generators accept (or a kernel that cannot run it)
      ++refused;
      continue;
    }
    std::string what;
    for (const auto& x : sets) what += x + " ";
    ASSERT_EQ(count_step_ops(e), int64_t(s.ops.size())) << what;
    ++checked;
  }
  EXPECT_GE(checked, 60) << refused << " refused";
}

TEST(Footprint, DefaultStepCountedExactlyWithoutGenerating) {
  // The shipped default step (36 layers, 512K tokens, cp = 32, hierarchical,
  // dynamic top-p patterns): 593,488 ops when generated (bench_default_step).
  const Experiment e = load_experiment(ConfigStore{}, "", {});
  EXPECT_EQ(count_step_ops(e), 593488);
}

TEST(Footprint, BytesGrowWithTheOpsAndSimulationNeedsMore) {
  const Experiment small = load({}), big = load({"model.layers=8"});
  const Footprint a = estimate_footprint(small, RunKind::schedule), b = estimate_footprint(big, RunKind::schedule);
  EXPECT_GT(b.ops, a.ops);
  EXPECT_GT(b.bytes, a.bytes);
  EXPECT_GT(estimate_footprint(small, RunKind::simulate).bytes, a.bytes);
}

TEST(Footprint, RefusesWhatDoesNotFitNamingBothFigures) {
  const Experiment e = load({});
  const Footprint f = estimate_footprint(e, RunKind::simulate);
  ::setenv("RINGMASTER_MEMORY_BYTES", std::to_string(f.bytes - 1).c_str(), 1);
  EXPECT_EQ(machine_memory_bytes(), f.bytes - 1);
  try {
    check_fits(f, "this run");
    ADD_FAILURE() << "expected a refusal";
  } catch (const ConfigError& x) {
    const std::string m = x.what();
    EXPECT_NE(m.find("this run needs ~"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(f.ops) + " ops"), std::string::npos) << m;
    EXPECT_NE(m.find("this machine has"), std::string::npos) << m;
  }
  ::setenv("RINGMASTER_MEMORY_BYTES", std::to_string(f.bytes).c_str(), 1);
  EXPECT_NO_THROW(check_fits(f, "this run"));
  ::unsetenv("RINGMASTER_MEMORY_BYTES");
  EXPECT_GT(machine_memory_bytes(), 0);
}

}  // namespace
}  // namespace rm::generate
