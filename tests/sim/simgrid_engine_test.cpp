// The SimGrid engine with compute in the driver's own queue and transfer ends
// from SimGrid's signals gives the same op times, bit for bit, as the engine
// it replaced (every compute a SimGrid execution, wait_any over everything in
// flight; run_simgrid_reference): on random schedules of every op kind, on a
// ring of identical ranks (exact ties at every step), and on reduced shipped
// experiments with contention on shared uplinks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/simgrid_engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "tests/support/synthetic_schedules.hpp"

namespace rm::engine {
namespace {

// Bitwise: the same doubles, not merely close ones.
void expect_same_bits(const OpTimes& got, const OpTimes& want, const std::string& what) {
  ASSERT_EQ(got.start.size(), want.start.size()) << what;
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < want.start.size(); ++i)
    if (std::memcmp(&got.start[i], &want.start[i], sizeof(double)) != 0 ||
        std::memcmp(&got.end[i], &want.end[i], sizeof(double)) != 0)
      if (differ++ == 0) first = i;
  EXPECT_EQ(differ, 0u) << what << ": first at op " << first << ": start " << got.start[first] << " vs "
                        << want.start[first] << ", end " << got.end[first] << " vs " << want.end[first];
}

struct Platform {
  Cluster cluster;
  topology::Topology topo;
  cost::CostModel model;
  explicit Platform(const std::string& name, int nodes = 0)
      : cluster(load(name, nodes)), topo(cluster),
        model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu)) {}
  static Cluster load(const std::string& name, int nodes) {
    auto c = ConfigStore().load("clusters", name, "test");
    Cluster out = parse_cluster(JsonReader(c.json, c.source));
    if (nodes > 0) out.nodes = nodes;
    return out;
  }
};

TEST(SimGridEngine, MatchesTheWaitAnyEngineOnRandomSchedules) {
  const Platform p("a100-80g-8x8-hdr", 2);  // 16 GPUs, rails: cross-node flows share uplinks
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const auto s = random_schedule({seed, 6 + int(seed % 3), 300});
    expect_same_bits(run_simgrid(s, p.topo, p.model), run_simgrid_reference(s, p.topo, p.model),
                     "seed " + std::to_string(seed));
  }
}

TEST(SimGridEngine, MatchesTheWaitAnyEngineOnARingOfIdenticalRanks) {
  const Platform p("a100-40g-4x8-hdr");
  // 32 identical ranks: every compute end and every transfer end ties with 31 others.
  const auto s = ring_schedule({32, 0, 12, 1e11, 16 << 20});
  expect_same_bits(run_simgrid(s, p.topo, p.model), run_simgrid_reference(s, p.topo, p.model), "ring");
}

TEST(SimGridEngine, MatchesTheWaitAnyEngineOnReducedExperiments) {
  const std::vector<std::vector<std::string>> cases{
      {"workload.seq_len=32k", "model.layers=2", "scope=layer"},
      {"cluster=a100-80g-8x8-hdr", "cluster.nodes=4", "model=llama3-8b", "model.layers=2", "workload.seq_len=16k",
       "workload.pattern=dense-causal", "parallel.cp=32", "parallel.ring=ring", "parallel.partition=zigzag",
       "scope=step"},
  };
  for (const auto& sets : cases) {
    const Experiment e = load_experiment(ConfigStore(), "", sets);
    pipeline::Session session;
    const auto s = session.schedule(e);
    const topology::Topology topo(e.cluster);
    const auto m = cost::CostModel::for_experiment(e);
    expect_same_bits(run_simgrid(s, topo, m), run_simgrid_reference(s, topo, m), sets.back());
  }
  const Experiment loong = load_experiment(ConfigStore(), "loongtrain-llama2-7b-1m",
                                           {"workload.seq_len=64k", "model.layers=2", "scope=attention_fwd_bwd"});
  pipeline::Session session;
  const auto s = session.schedule(loong);
  const topology::Topology topo(loong.cluster);
  const auto m = cost::CostModel::for_experiment(loong);
  expect_same_bits(run_simgrid(s, topo, m), run_simgrid_reference(s, topo, m), "loongtrain");
}

TEST(SimGridEngine, AMissingModuleIsOneLineNamingIt) {
  // The engine is a module loaded on first use (simgrid_loader.cpp): where it is
  // missing, the run fails with the path and the loader's reason, not a crash.
  const Platform p("a100-40g-4x8-hdr");
  const auto s = ring_schedule({4, 0, 2, 1e11, 1 << 20});
  ::setenv("RINGMASTER_SIMGRID_MODULE", "/nonexistent/libringmaster_simgrid.so", 1);
  try {
    run_simgrid(s, p.topo, p.model);
    ADD_FAILURE() << "ran without its module";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load /nonexistent/libringmaster_simgrid.so"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  ::unsetenv("RINGMASTER_SIMGRID_MODULE");
  EXPECT_EQ(run_simgrid(s, p.topo, p.model).end.size(), s.ops.size());  // the real one still loads
}

}  // namespace
}  // namespace rm::engine
