// A Session builds one Topology per distinct cluster topology and reuses it
// for every schedule, simulation and imbalance report of that cluster.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace rm::pipeline {
namespace {

Experiment variant(std::vector<std::string> more) {
  std::vector<std::string> all{"workload.seq_len=8k", "model.layers=1", "scope=layer"};
  all.insert(all.end(), more.begin(), more.end());
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", all);
}

TEST(SessionTopology, OnePerDistinctCluster) {
  Session s;
  const Experiment a = variant({});
  const topology::Topology& t = s.topology(a);
  EXPECT_EQ(&t, &s.topology(variant({"parallel.window=8"})));  // same cluster, other parallelism
  const topology::Topology& more = s.topology(variant({"cluster.nodes=8"}));
  EXPECT_NE(&t, &more);
  EXPECT_EQ(more.gpus(), 2 * t.gpus());
  EXPECT_EQ(&t, &s.topology(a));  // still there after another was added
  // A simulation through the session's Topology is the one through a fresh one.
  const Simulation cached = s.simulate(a, engine::EngineKind::analytic);
  const Simulation fresh = simulate_schedule(a, s.schedule(a), engine::EngineKind::analytic);
  EXPECT_EQ(cached.report.step_time_s, fresh.report.step_time_s);
}

}  // namespace
}  // namespace rm::pipeline
