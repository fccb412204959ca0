// Skipping an analytic run that would repeat the last one (engine::AnalyticReuse):
// raising the capacity of links that never set a rate (FlowNetwork::binding)
// must leave every rate and end time unchanged, bit for bit — on random flow
// sets against a replay — and a reused run's op times must be a fresh run's,
// bit for bit, over cluster what-ifs that do and do not repeat the run
// (raised and lowered NIC and PCIe bandwidth, latency, cost; the
// data-parallel shortcut), with the reuse actually taken where it applies.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sim/config/config_store.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "tests/support/flow_replay.hpp"
#include "sim/report/step_report.hpp"

namespace rm::engine {
namespace {

using test::FlowReplay;
using Start = test::FlowStart;
FlowReplay replay(std::vector<double> caps, const std::vector<Start>& flows) { return test::replay_flows(std::move(caps), flows); }

TEST(AnalyticReuse, RaisingLinksThatNeverBoundChangesNoRate) {
  std::mt19937_64 rng(7);
  int raised = 0, bound = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 2 + int(rng() % 6);
    std::vector<double> caps(static_cast<size_t>(L), 0.0);
    // Few distinct capacities, so ties between links are common.
    for (double& c : caps) c = double(1 + rng() % 4) * 10;
    std::vector<Start> flows;
    const int F = 1 + int(rng() % 12);
    for (int f = 0; f < F; ++f) {
      std::vector<int> links;
      for (int l = 0; l < L; ++l)
        if (rng() % 3 == 0) links.push_back(l);
      if (links.empty()) links.push_back(int(rng() % uint64_t(L)));
      flows.push_back({double(rng() % 5), links, double(1 + rng() % 100)});
    }
    const FlowReplay base = replay(caps, flows);
    std::vector<double> more = caps;
    for (int l = 0; l < L; ++l) {
      if (base.binding[size_t(l)]) {
        ++bound;
        continue;
      }
      more[size_t(l)] *= 1 + double(rng() % 4);  // x1 (equal) to x4
      ++raised;
    }
    const FlowReplay again = replay(more, flows);
    ASSERT_EQ(again.rates, base.rates) << "trial " << trial;
    ASSERT_EQ(again.ends, base.ends) << "trial " << trial;
  }
  EXPECT_GT(raised, 100);  // both kinds occur often
  EXPECT_GT(bound, 100);
}

// And the converse the reuse must not take: lowering a link that never bound
// can change the rates (so a lowered capacity always reruns).
TEST(AnalyticReuse, LoweringALinkThatNeverBoundCanChangeRates) {
  // Flow 0 over links 0 (10 B/s, binding) and 1 (100 B/s, not): lowered to 5, link 1 binds.
  const FlowReplay base = replay({10, 100}, {{0, {0, 1}, 100}});
  EXPECT_EQ(base.binding, (std::vector<char>{1, 0}));
  EXPECT_NE(replay({10, 5}, {{0, {0, 1}, 100}}).ends, base.ends);
}

Experiment variant(std::vector<std::string> more) {
  std::vector<std::string> all{"workload.seq_len=16k", "model.layers=2"};
  all.insert(all.end(), more.begin(), more.end());
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", all);
}

void expect_same(const OpTimes& a, const OpTimes& b, const std::string& what) {
  ASSERT_EQ(a.start.size(), b.start.size()) << what;
  size_t differ = 0;
  for (size_t i = 0; i < a.start.size(); ++i) differ += a.start[i] != b.start[i] || a.end[i] != b.end[i];
  EXPECT_EQ(differ, 0u) << what;
}

// One Schedule, cluster what-ifs in turn on one AnalyticReuse: each run's op
// times equal a fresh run's; returns how many of them skipped the run.
int64_t expect_reuse(const std::vector<std::string>& base, const std::vector<std::vector<std::string>>& what_ifs,
                     bool one_replica = false) {
  pipeline::Session session;
  const Experiment e0 = variant(base);
  std::string why;
  const schedule::Schedule s = one_replica ? *session.one_replica_schedule(e0, why) : session.schedule(e0);
  EXPECT_EQ(s.symmetry.replicas > 1, one_replica) << why;
  const schedule::RunPlan plan(s);
  AnalyticReuse reuse;
  for (const auto& w : what_ifs) {
    std::vector<std::string> sets = base;
    sets.insert(sets.end(), w.begin(), w.end());
    const Experiment e = variant(sets);
    const topology::Topology topo(e.cluster);
    const auto cost = cost::CostModel::for_experiment(e);
    const OpTimes fresh = run_analytic(s, plan, topo, cost);
    expect_same(run_analytic(s, plan, topo, cost, nullptr, &reuse), fresh, w.empty() ? "base" : w.back());
  }
  EXPECT_EQ(reuse.runs() + reuse.reused(), int64_t(what_ifs.size()));
  return reuse.reused();
}

// The default experiment's ring crosses nodes through PCIe, which caps the NIC
// above 200 Gb/s: faster NICs repeat the run; a slower NIC, PCIe, latency or
// compute cost do not.
TEST(AnalyticReuse, FasterNicsRepeatTheRunOtherWhatIfsRerun) {
  // Reused: 800 after 400, 800 again, 1600; and the PCIe what-if given twice.
  EXPECT_EQ(expect_reuse({"scope=layer"},
               {{"cluster.nic.bandwidth_Gbps=100"},
                {"cluster.nic.bandwidth_Gbps=400"},
                {"cluster.nic.bandwidth_Gbps=800"},
                {"cluster.nic.bandwidth_Gbps=800"},
                {"cluster.nic.bandwidth_Gbps=1600"},
                {"cluster.nic.bandwidth_Gbps=50"},
                {"cluster.nic.bandwidth_Gbps=50", "cluster.nic.latency_us=9"},
                {"cluster.nic.bandwidth_Gbps=50", "cluster.pcie.bandwidth_GBps=5"},
                {"cluster.nic.bandwidth_Gbps=50", "cluster.pcie.bandwidth_GBps=5"},
                {"cluster.nic.bandwidth_Gbps=50", "cluster.pcie.bandwidth_GBps=5", "cluster.cost.gemm_efficiency=0.3"}}),
            4);
}

TEST(AnalyticReuse, WholeStepAndOtherLayouts) {
  for (const std::vector<std::string>& base :
       {std::vector<std::string>{"scope=step"}, {"scope=layer", "parallel.ring=ring", "parallel.partition=zigzag"},
        {"scope=layer", "parallel.hp=4", "parallel.cp=8", "parallel.ring=double_ring", "parallel.window=2"}}) {
    SCOPED_TRACE(base.back());
    expect_reuse(base, {{"cluster.nic.bandwidth_Gbps=400"}, {"cluster.nic.bandwidth_Gbps=800"},
                        {"cluster.intra_node.bandwidth_GBps=30"}, {"cluster.intra_node.bandwidth_GBps=300"}});
  }
}

// Under the data-parallel shortcut the folded routes and their weights are compared too.
TEST(AnalyticReuse, DataParallelShortcut) {
  EXPECT_GE(expect_reuse({"scope=step", "parallel.dp=2", "parallel.cp=16"},
                         {{"cluster.nic.bandwidth_Gbps=400"}, {"cluster.nic.bandwidth_Gbps=800"},
                          {"cluster.nic.bandwidth_Gbps=100"}, {"cluster.nic.bandwidth_Gbps=1600"}},
                         /*one_replica=*/true),
            1);
}

// A sweep's Session takes the reuse and reports each point as a fresh Session does.
TEST(AnalyticReuse, SessionPointsEqualFreshOnes) {
  pipeline::Session s;
  for (const char* nic : {"100", "400", "800", "1100", "25"}) {
    const Experiment e = variant({"scope=layer", std::string("cluster.nic.bandwidth_Gbps=") + nic});
    const pipeline::PointResult point = s.run_point(e, EngineKind::analytic);
    const pipeline::Simulation fresh = pipeline::Session().simulate(e, EngineKind::analytic);
    EXPECT_EQ(report::to_json(point.report).dump(), report::to_json(fresh.report).dump()) << nic;
  }
  EXPECT_EQ(s.schedule_builds(), 1);
  EXPECT_GE(s.engine_runs_reused(), 1);
}

}  // namespace
}  // namespace rm::engine
