// bound_by under the data-parallel shortcut (docs/engines.md "Replica
// symmetry"): the one-replica Schedule's bound_by counts every replica's
// transfers (translates, and groups spanning replicas planned for all their
// members), so it must equal the full run's: every link that carried bytes
// with its figures, the link kinds, what caps each traffic class, the phases,
// the verdict and the notes. Figures are compared to 1e-9 relative (the two
// sum the same bytes in another order); names, kinds and texts exactly.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/fast_report.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/schedule/run_driver.hpp"
#include "tests/support/symmetry_cases.hpp"

namespace rm::report {
namespace {

Experiment load(const std::vector<std::string>& sets) { return test::symmetry_experiment(sets); }
using test::joined;

void near(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 1e-9 * std::max(std::abs(a), std::abs(b)) + 1e-15) << what;
}

void expect_same_bound_by(const std::vector<std::string>& sets) {
  SCOPED_TRACE(joined(sets));
  const Experiment e = load(sets);
  pipeline::Session session;
  schedule::Schedule one = test::one_replica(session, e);
  ASSERT_GT(one.symmetry.replicas, 1);
  const auto full = pipeline::simulate_schedule(e, session.schedule(e), session.topology(e), engine::EngineKind::analytic);
  const auto fold = pipeline::simulate_schedule(e, std::move(one), session.topology(e), engine::EngineKind::analytic);
  ASSERT_TRUE(full.report.bound_by && fold.report.bound_by);
  const BoundBy& a = *full.report.bound_by;
  const BoundBy& b = *fold.report.bound_by;
  ASSERT_FALSE(a.links.empty());
  EXPECT_EQ(to_string(a.kind), to_string(b.kind));
  EXPECT_EQ(brief(a), brief(b));
  EXPECT_EQ(a.verdict, b.verdict);
  EXPECT_EQ(a.notes, b.notes);
  // Links by name (equal utilisations may sort apart by a rounding).
  ASSERT_EQ(a.links.size(), b.links.size());
  std::map<std::string, const LinkLoad*> by_name;
  for (const LinkLoad& l : b.links) by_name[l.name] = &l;
  for (const LinkLoad& l : a.links) {
    ASSERT_TRUE(by_name.count(l.name)) << l.name;
    const LinkLoad& o = *by_name[l.name];
    EXPECT_EQ(l.kind, o.kind) << l.name;
    near(l.bytes, o.bytes, l.name + " bytes");
    near(l.busy_s, o.busy_s, l.name + " busy_s");
    near(l.utilisation, o.utilisation, l.name + " utilisation");
    near(l.busy_utilisation, o.busy_utilisation, l.name + " busy_utilisation");
    near(l.critical_s, o.critical_s, l.name + " critical_s");
    near(l.ring_bytes, o.ring_bytes, l.name + " ring_bytes");
    near(l.ring_busy_s, o.ring_busy_s, l.name + " ring_busy_s");
    ASSERT_EQ(l.phases.size(), o.phases.size()) << l.name;
    for (size_t p = 0; p < l.phases.size(); ++p) {
      EXPECT_EQ(l.phases[p].phase, o.phases[p].phase) << l.name;
      near(l.phases[p].bytes, o.phases[p].bytes, l.name + " phase bytes");
      near(l.phases[p].busy_s, o.phases[p].busy_s, l.name + " phase busy_s");
    }
  }
  ASSERT_EQ(a.kinds.size(), b.kinds.size());
  for (size_t k = 0; k < a.kinds.size(); ++k) {
    EXPECT_EQ(a.kinds[k].kind, b.kinds[k].kind);
    EXPECT_EQ(a.kinds[k].links, b.kinds[k].links);
    near(a.kinds[k].bytes, b.kinds[k].bytes, a.kinds[k].kind + " kind bytes");
    near(a.kinds[k].utilisation, b.kinds[k].utilisation, a.kinds[k].kind + " kind utilisation");
  }
  ASSERT_EQ(a.traffic.size(), b.traffic.size());
  for (size_t c = 0; c < a.traffic.size(); ++c) {
    EXPECT_EQ(a.traffic[c].inter_node, b.traffic[c].inter_node);
    EXPECT_EQ(a.traffic[c].capped_by, b.traffic[c].capped_by);
    near(a.traffic[c].bytes, b.traffic[c].bytes, "class bytes");
    near(a.traffic[c].capped_share, b.traffic[c].capped_share, "capped share");
    ASSERT_EQ(a.traffic[c].kinds.size(), b.traffic[c].kinds.size());
  }
  ASSERT_EQ(a.phases.size(), b.phases.size());
  for (size_t p = 0; p < a.phases.size(); ++p) {
    EXPECT_EQ(a.phases[p].phase, b.phases[p].phase);
    near(a.phases[p].compute_mean_s, b.phases[p].compute_mean_s, "compute mean");
    near(a.phases[p].compute_max_s, b.phases[p].compute_max_s, "compute max");
    near(a.phases[p].exposed_comm_mean_s, b.phases[p].exposed_comm_mean_s, "exposed mean");
    near(a.phases[p].exposed_comm_max_s, b.phases[p].exposed_comm_max_s, "exposed max");
    near(a.phases[p].critical_compute_s, b.phases[p].critical_compute_s, "critical compute");
    near(a.phases[p].critical_comm_s, b.phases[p].critical_comm_s, "critical comm");
  }
  near(a.critical_length_s, b.critical_length_s, "critical length");
  near(a.imbalance_lost_s, b.imbalance_lost_s, "imbalance lost");
}

TEST(SymmetryBoundBy, AttentionScopesAndSteps) {
  expect_same_bound_by({"scope=attention_fwd_bwd", "parallel.dp=2", "parallel.cp=4"});
  expect_same_bound_by({"scope=layer", "parallel.dp=4", "parallel.cp=2", "parallel.hp=2"});
  expect_same_bound_by({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=1"});
  expect_same_bound_by({"scope=step", "parallel.dp=4", "parallel.cp=8"});
  expect_same_bound_by({"scope=step", "parallel.dp=2", "parallel.cp=2", "parallel.tp=2", "parallel.hp=2",
                        "parallel.zero_stage=3"});
}

// A shortcut Schedule's spanning groups are planned by the one collective plan
// (cost::plan_collective), whoever asks: bound_by called with nothing but the
// Schedule and its Timeline counts what the pipeline's report counted.
TEST(SymmetryBoundBy, SpanningGroupsArePlannedByTheOneCollectivePlan) {
  const Experiment e = load({"scope=step", "parallel.dp=2", "parallel.cp=4"});
  pipeline::Session session;
  const schedule::Schedule one = test::one_replica(session, e);
  const auto sim = pipeline::simulate_schedule(e, one, session.topology(e), engine::EngineKind::analytic);
  ASSERT_TRUE(sim.report.bound_by);
  const BoundBy b = bound_by(one, sim.timeline, session.topology(e), cost::CostModel::for_experiment(e),
                             sim.report.critical_path, sim.report.imbalance.step_measured);
  const BoundBy& a = *sim.report.bound_by;
  EXPECT_EQ(a.verdict, b.verdict);
  EXPECT_EQ(a.notes, b.notes);
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t i = 0; i < a.links.size(); ++i) EXPECT_EQ(a.links[i].bytes, b.links[i].bytes) << a.links[i].name;
}

// What bound_by keeps of a shortcut run grows with one replica, not with dp:
// replica 0's transfers, each naming a route set of its translates' routes (a
// record per translate took the 4,096-GPU step to 20 GB). Same figures as the
// Timeline path, which the tests above hold to the full run.
TEST(SymmetryBoundBy, TranslatesAreRouteSetsNotRecordsOfTheirOwn) {
  const Experiment e = load({"scope=attention_fwd_bwd", "parallel.dp=4", "parallel.cp=4"});
  pipeline::Session session;
  const schedule::Schedule s = test::one_replica(session, e);
  const int R = s.symmetry.replicas;
  ASSERT_EQ(R, 4);
  const schedule::RunPlan plan(s);
  const topology::Topology& topo = session.topology(e);
  const cost::CostModel cost = cost::CostModel::for_experiment(e);
  engine::OpTimes times = engine::run_analytic(s, plan, topo, cost);
  const ReportPrep prep(e, s, plan, engine::timeline_edges(s, plan));
  const OpSpans spans{std::move(times.start), std::move(times.end), {}};
  TimedParts kept;
  const StepReport fast = fast_step_report(e, s, plan, prep, spans, topo, cost, true, &kept);
  ASSERT_TRUE(kept.has_traffic);
  const core::LinkTraffic& tr = kept.traffic;
  EXPECT_EQ(tr.replicas, R);
  ASSERT_FALSE(tr.counted.empty());
  EXPECT_LE(tr.counted.size(), prep.flows.flows.size());  // at most one per replica-0 transfer
  ASSERT_EQ(tr.route_sets.size() % size_t(R), 0u);
  for (const auto& [set, bytes] : tr.counted) ASSERT_LT(size_t(set) * size_t(R), tr.route_sets.size());
  // The translates are on other GPUs: a set's routes are distinct.
  for (size_t set = 0; set * size_t(R) < tr.route_sets.size(); ++set)
    for (int k = 1; k < R; ++k) EXPECT_NE(tr.route_sets[set * size_t(R)], tr.route_sets[set * size_t(R) + size_t(k)]);
  const auto slow = pipeline::simulate_schedule(e, s, topo, engine::EngineKind::analytic, pipeline::WithTimeline::yes);
  ASSERT_TRUE(fast.bound_by && slow.report.bound_by);
  EXPECT_EQ(brief(*fast.bound_by), brief(*slow.report.bound_by));
  ASSERT_EQ(fast.bound_by->links.size(), slow.report.bound_by->links.size());
  for (size_t i = 0; i < fast.bound_by->links.size(); ++i)
    EXPECT_EQ(fast.bound_by->links[i].bytes, slow.report.bound_by->links[i].bytes) << fast.bound_by->links[i].name;
}

}  // namespace
}  // namespace rm::report
