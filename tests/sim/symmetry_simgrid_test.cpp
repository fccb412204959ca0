// The data-parallel shortcut on the SimGrid engine (sim/engine/symmetry.hpp,
// docs/simgrid.md "One replica for all") against SimGrid's full simulation on
// cases small enough to run both: every replica-0 op's start and end, and the
// step time, to the bit. The shortcut gives a link shared by w translates of each
// flow 1/w of its capacity, so SimGrid's solver divides in another order than over
// the w x n flows of the full step; on every case here (w = 2, 3, 4 on the rail
// spines) the times still came out bit-identical, and the test holds them to it.
// Should a case ever differ in the last bits, the message prints the worst
// relative difference (it must then stay under kRelTol for the printed digits).
// Fabrics: one NVSwitch, rail-optimised with spines shared by the replicas
// (weights > 1), leaf/spine, a PCIe/NVLink mesh. A folded route that is not a
// translate is refused, as the analytic engine refuses it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/simgrid_engine.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/validate.hpp"
#include "tests/support/symmetry_cases.hpp"

namespace rm::engine {
namespace {

constexpr double kRelTol = 1e-12;

Experiment load(const std::vector<std::string>& sets) { return test::symmetry_experiment(sets); }
using test::joined;

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool close(double a, double b) { return std::fabs(a - b) <= kRelTol * std::max(std::fabs(a), std::fabs(b)); }

// Full SimGrid run vs one replica on SimGrid: replica 0's ops take the same times.
void expect_same(const std::vector<std::string>& sets) {
  SCOPED_TRACE(joined(sets));
  const Experiment e = load(sets);
  pipeline::Session session;
  const schedule::Schedule full = session.schedule(e);
  std::string why;
  auto one = session.one_replica_schedule(e, why);
  ASSERT_TRUE(one.has_value()) << why;
  const auto& topo = session.topology(e);
  const auto cost = cost::CostModel::for_experiment(e);
  const OpTimes tf = run_simgrid(full, topo, cost);
  const OpTimes t1 = run_simgrid(*one, topo, cost);
  const int R = e.parallel.world() / e.parallel.dp;
  std::vector<schedule::OpId> rep0;  // replica 0's ops of the full step, in id order: the reduced Schedule's
  for (const auto& op : full.ops)
    if (op.rank < R) rep0.push_back(op.id);
  ASSERT_EQ(rep0.size(), one->ops.size());
  int inexact = 0;
  double worst = 0;
  for (size_t i = 0; i < rep0.size(); ++i) {
    const double fs = tf.start[size_t(rep0[i])], fe = tf.end[size_t(rep0[i])];
    if (fs != t1.start[i] || fe != t1.end[i]) ++inexact;
    for (auto [a, b] : {std::pair{fs, t1.start[i]}, {fe, t1.end[i]}})
      if (a != b) worst = std::max(worst, std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b)));
    if ((fs != t1.start[i] || fe != t1.end[i]) && inexact <= 3)
      ADD_FAILURE() << schedule::describe(*one, one->ops[i].id) << ": full " << fs << " .. " << fe
                    << ", one replica " << t1.start[i] << " .. " << t1.end[i]
                    << (close(fs, t1.start[i]) && close(fe, t1.end[i]) ? " (within kRelTol)" : "");
  }
  EXPECT_EQ(inexact, 0) << "worst relative difference " << worst;
  const double step_full = *std::max_element(tf.end.begin(), tf.end.end());
  const double step_one = *std::max_element(t1.end.begin(), t1.end.end());
  EXPECT_EQ(step_full, step_one);
  // Through the pipeline, as `ringmaster simulate --symmetry dp --engine simgrid` runs it.
  const auto r1 = pipeline::simulate_schedule(e, *one, topo, EngineKind::simgrid).report;
  EXPECT_EQ(r1.step_time_s, step_one);
  EXPECT_EQ(r1.gpus, e.parallel.world());
}

const std::vector<std::string> kRail = {"cluster.fabric.kind=rail_optimized", "cluster.fabric.spines=1",
                                        "cluster.fabric.uplink_bandwidth_Gbps=100"};
const std::vector<std::string> kLeafSpine = {"cluster=h100-8x8-ndr", "cluster.fabric.spines=1",
                                             "cluster.fabric.nodes_per_leaf=2", "cluster.fabric.uplink_bandwidth_Gbps=400"};

TEST(SymmetrySimGrid, ScopesOnOneSwitch) {
  expect_same({"scope=attention_fwd", "parallel.dp=2", "parallel.cp=4"});
  expect_same({"scope=attention_fwd_bwd", "parallel.dp=4", "parallel.cp=2", "parallel.hp=2"});
  expect_same({"scope=layer", "parallel.dp=2", "parallel.cp=2", "parallel.tp=2"});
  expect_same({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=1"});
  expect_same({"scope=step", "parallel.dp=4", "parallel.cp=8", "parallel.zero_stage=3"});
}

TEST(SymmetrySimGrid, RailOptimisedSpinesSharedByReplicas) {
  // The replicas' cross-rail hops share the oversubscribed spine uplinks: capacity / w with w > 1.
  expect_same(with({"scope=step", "parallel.dp=2", "parallel.cp=16", "parallel.zero_stage=2"}, kRail));
  expect_same(with({"scope=attention_fwd_bwd", "parallel.dp=4", "parallel.cp=8", "parallel.ring=ring"}, kRail));
  // w = 3: capacity / 3 is not exact in binary, unlike / 2 and / 4.
  expect_same(with({"scope=step", "parallel.dp=3", "parallel.cp=8", "cluster.nodes=3"}, kRail));
}

TEST(SymmetrySimGrid, LeafSpineAndMesh) {
  expect_same(with({"scope=step", "parallel.dp=4", "parallel.cp=16"}, kLeafSpine));
  const std::vector<std::string> dgx1 = {"cluster=v100-dgx1-1x8", "cluster.gpu.model=A100-SXM4-80GB",
                                         "cluster.gpu.peak_tflops_bf16=312", "kernel.attention=fa2",
                                         "workload.pattern=dense-causal"};
  expect_same(with({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=3"}, dgx1));
}

TEST(SymmetrySimGrid, AgreesWithTheAnalyticShortcutWithoutContention) {
  // One replica on SimGrid and on the analytic engine: both engines agree on
  // contention-free cases (DESIGN.md), so the folded platform is the analytic's.
  const Experiment e = load({"scope=attention_fwd", "parallel.dp=2", "parallel.cp=4"});
  pipeline::Session session;
  std::string why;
  auto one = session.one_replica_schedule(e, why);
  ASSERT_TRUE(one.has_value()) << why;
  const auto cost = cost::CostModel::for_experiment(e);
  const OpTimes a = run_analytic(*one, session.topology(e), cost);
  const OpTimes g = run_simgrid(*one, session.topology(e), cost);
  const double sa = *std::max_element(a.end.begin(), a.end.end());
  const double sg = *std::max_element(g.end.begin(), g.end.end());
  EXPECT_NEAR(sa, sg, 1e-6 * sa);
}

TEST(SymmetrySimGrid, RefusesWhereRoutesAreNotTranslates) {
  // Replicas of 4 GPUs on nodes of 8: replica 0 -> 1 stays on node 0, 1 -> 2 crosses nodes.
  const Experiment e = load({"scope=step", "parallel.dp=3", "parallel.cp=4", "cluster.nodes=2"});
  pipeline::Session session;
  auto s = generate::generate_step(e, session.patterns(e), session.topology(e), nullptr, generate::Replicas::one);
  try {
    run_simgrid(s, session.topology(e), cost::CostModel::for_experiment(e));
    ADD_FAILURE() << "ran a one-replica Schedule whose routes are not translates";
  } catch (const schedule::ScheduleError& err) {
    EXPECT_NE(std::string(err.what()).find("the data-parallel shortcut is not exact here"), std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace rm::engine
