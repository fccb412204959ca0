// The pipeline's caches: a second evaluation of a variant of one experiment
// builds no pattern and counts no pair cost again, and cached results are the
// uncached ones exactly.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/imbalance.hpp"
#include "sim/topology/topology.hpp"

namespace rm::pipeline {
namespace {

// The default experiment (cp = 32 over 4 nodes, stripe, hierarchical, top-p)
// cut to 2 layers of 8K tokens and one layer's scope.
Experiment variant(std::vector<std::string> more) {
  std::vector<std::string> all{"workload.seq_len=8k", "model.layers=2", "scope=layer"};
  all.insert(all.end(), more.begin(), more.end());
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", all);
}

TEST(Session, AnotherRingKindReusesPatternsPartitionsAndPairCosts) {
  Session s;
  // The layer scope counts layer 0, the imbalance report every layer.
  s.simulate(variant({}), engine::EngineKind::analytic);
  const int64_t layer0 = s.work().pair_cost_builds();
  EXPECT_GT(layer0, 0);
  s.imbalance(variant({}), {Partition::stripe});
  EXPECT_EQ(s.pattern_builds(), 1);
  const int64_t partitions = s.work().partition_builds(), pairs = s.work().pair_cost_builds();
  EXPECT_EQ(partitions, 1);
  EXPECT_GE(pairs, layer0);
  // Every layer's heads, each distinct mask once (equal heads share one object).
  EXPECT_EQ(pairs, s.patterns(variant({})).distinct_heads());

  // Other ring kinds, a placement, a scope and the imbalance report of another
  // ring kind on the same partition: nothing is counted again.
  for (const auto& more : std::vector<std::vector<std::string>>{
           {"parallel.ring=ring"},
           {"parallel.ring=double_ring", "parallel.window=4"},
           {"parallel.placement=context_first"},
           {"scope=attention_fwd_bwd"}}) {
    EXPECT_FALSE(s.schedule(variant(more)).ops.empty());
  }
  s.imbalance(variant({"parallel.ring=ring"}), {Partition::stripe});
  EXPECT_EQ(s.pattern_builds(), 1);
  EXPECT_EQ(s.work().partition_builds(), partitions);
  EXPECT_EQ(s.work().pair_cost_builds(), pairs);

  // A new partition counts its pair costs once.
  s.schedule(variant({"parallel.partition=zigzag"}));
  EXPECT_EQ(s.work().partition_builds(), partitions + 1);
  EXPECT_GT(s.work().pair_cost_builds(), pairs);
  s.imbalance(variant({"parallel.ring=ring"}), {Partition::zigzag, Partition::stripe});
  const int64_t with_zigzag = s.work().pair_cost_builds();
  s.imbalance(variant({"parallel.ring=double_ring", "parallel.window=4"}), {Partition::zigzag, Partition::stripe});
  EXPECT_EQ(s.work().pair_cost_builds(), with_zigzag);
  EXPECT_EQ(s.work().partition_builds(), partitions + 1);
  // The pattern key: spec, seed, model shape (a cheap pattern keeps this fast).
  const Experiment dense = variant({"workload.pattern=dense-causal"});
  s.patterns(dense);
  EXPECT_EQ(s.pattern_builds(), 2);
  EXPECT_EQ(&s.patterns(dense), &s.patterns(variant({"workload.pattern=dense-causal", "parallel.ring=ring"})));
  s.patterns(variant({"workload.pattern=dense-causal", "workload.seed=2"}));
  s.patterns(variant({"workload.pattern=dense-causal", "model.layers=1"}));
  s.patterns(variant({"workload.pattern=dense-causal", "workload.seq_len=16k"}));
  EXPECT_EQ(s.pattern_builds(), 5);
}

TEST(Session, CachedResultsAreTheUncachedOnes) {
  Session s;
  s.schedule(variant({"model.layers=1"}));  // warm the caches
  const Experiment e = variant({"model.layers=1", "parallel.ring=double_ring", "parallel.window=8"});
  const Simulation cached = s.simulate(e, engine::EngineKind::analytic);

  const sparsity::SparsityModel m = build_patterns(e);
  const topology::Topology topo(e.cluster);
  // Session::simulate generates the costable-only Schedule (it is only simulated).
  const schedule::Schedule fresh =
      generate::generate_step(e, m, topo, nullptr, generate::Replicas::all, generate::Accesses::none);
  EXPECT_TRUE(cached.schedule == fresh);
  const Simulation uncached = simulate_schedule(e, fresh, engine::EngineKind::analytic);
  EXPECT_EQ(report::to_json(cached.report).dump(), report::to_json(uncached.report).dump());
  EXPECT_EQ(cached.timeline.makespan_s(), uncached.timeline.makespan_s());

  const std::vector<Partition> parts{Partition::stripe, Partition::zigzag, Partition::balanced};
  EXPECT_TRUE(s.imbalance(e, parts) == report::imbalance_report(e, m, topo, parts));
}

// A cluster what-if on links and costs reuses the Schedule (and its RunPlan),
// and its report is byte for byte a fresh run's; the what-ifs do move the step.
TEST(Session, ClusterWhatIfsReuseTheScheduleWithFreshFigures) {
  Session s;
  const std::vector<std::vector<std::string>> what_ifs{
      {},
      {"cluster.nic.bandwidth_Gbps=25"},
      {"cluster.nic.bandwidth_Gbps=800", "cluster.nic.latency_us=9"},
      {"cluster.pcie.bandwidth_GBps=5"},
      {"cluster.intra_node.bandwidth_GBps=30"},
      {"cluster.cost.gemm_efficiency=0.3", "cluster.cost.kernel_launch_us=50"},
  };
  std::vector<std::string> seen;
  for (const auto& w : what_ifs) {
    const Experiment e = variant(w);
    const PointResult point = s.run_point(e, engine::EngineKind::analytic);
    const Simulation fresh = Session().simulate(e, engine::EngineKind::analytic);
    EXPECT_EQ(report::to_json(point.report).dump(), report::to_json(fresh.report).dump()) << w.size();
    EXPECT_EQ(point.ops, int64_t(fresh.schedule.ops.size()));
    EXPECT_EQ(point.generator, fresh.schedule.generator);
    seen.push_back(fmt::format("{}", point.report.step_time_s));
  }
  EXPECT_EQ(s.schedule_builds(), 1);
  std::sort(seen.begin(), seen.end());
  EXPECT_GE(std::unique(seen.begin(), seen.end()) - seen.begin(), 4);  // most what-ifs change the step
}

// What the generators read changes the key: any non-cluster key, the node
// structure and the GPU (it picks the attention kernel's entry; the key keeps all of it).
TEST(Session, ScheduleKeySeparatesWhatTheGeneratorsRead) {
  const std::string base = schedule_key(variant({}));
  EXPECT_EQ(base, schedule_key(variant({"cluster.nic.bandwidth_Gbps=400", "cluster.pcie.latency_us=3"})));
  for (const std::vector<std::string>& v :
       {std::vector<std::string>{"parallel.partition=zigzag"}, {"parallel.checkpoint=none"}, {"workload.seed=3"},
        {"cluster.nodes=8"}, {"cluster.gpus_per_node=4", "cluster.nics_per_node=4", "cluster.nodes=8"},
        {"cluster.gpu.memory_GB=80"}})
    EXPECT_NE(base, schedule_key(variant(v))) << v[0];
  Session s;
  s.run_point(variant({}), engine::EngineKind::analytic);
  s.run_point(variant({"parallel.partition=zigzag"}), engine::EngineKind::analytic);
  s.run_point(variant({"parallel.partition=zigzag", "cluster.nic.bandwidth_Gbps=50"}), engine::EngineKind::analytic);
  EXPECT_EQ(s.schedule_builds(), 2);
}

}  // namespace
}  // namespace rm::pipeline
