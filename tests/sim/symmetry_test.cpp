// The data-parallel shortcut (sim/engine/symmetry.hpp, docs/engines.md "Replica
// symmetry") against the full simulation on cases small enough to run both:
// every replica-0 op's start and end, the step time and the report's figures,
// over dp, cp, hp, tp, scopes, ZeRO stages and fabrics (NVSwitch with one switch,
// rail-optimised with oversubscribed spines, leaf/spine, a PCIe/NVLink mesh).
// Where the routes are not translates the shortcut must refuse, saying why.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/validate.hpp"
#include "tests/support/symmetry_cases.hpp"

namespace rm::engine {
namespace {

Experiment load(const std::vector<std::string>& sets) { return test::symmetry_experiment(sets); }
using test::joined;


// Full simulation vs one replica: identical, op for op.
void expect_exact(const std::vector<std::string>& sets) {
  SCOPED_TRACE(joined(sets));
  const Experiment e = load(sets);
  pipeline::Session session;
  const schedule::Schedule full = session.schedule(e);
  std::string why;
  auto one = session.one_replica_schedule(e, why);
  ASSERT_TRUE(one.has_value()) << why;
  const schedule::Schedule& s1 = *one;
  const int R = e.parallel.world() / e.parallel.dp;
  ASSERT_EQ(s1.symmetry.replicas, e.parallel.dp);
  ASSERT_EQ(int(s1.ranks.size()), R);
  EXPECT_EQ(generate::count_replica_ops(e), int64_t(s1.ops.size()));
  EXPECT_EQ(generate::count_step_ops(e), int64_t(s1.ops.size()) * e.parallel.dp);

  const auto& topo = session.topology(e);
  const auto cost = cost::CostModel::for_experiment(e);
  const OpTimes tf = run_analytic(full, topo, cost);
  const OpTimes t1 = run_analytic(s1, topo, cost);
  // Replica 0's ops of the full step, in id order, are the reduced Schedule's ops.
  std::vector<schedule::OpId> rep0;
  for (const auto& op : full.ops)
    if (op.rank < R) rep0.push_back(op.id);
  ASSERT_EQ(rep0.size(), s1.ops.size());
  int differ = 0;
  for (size_t i = 0; i < rep0.size(); ++i) {
    const auto& a = full.ops[size_t(rep0[i])];
    const auto& b = s1.ops[i];
    ASSERT_TRUE(a.kind == b.kind && a.rank == b.rank && a.stream == b.stream && a.layer == b.layer &&
                a.phase == b.phase && full.desc(a).bytes == s1.desc(b).bytes && full.desc(a).flops == s1.desc(b).flops)
        << schedule::describe(full, a.id) << " vs " << schedule::describe(s1, b.id);
    if (tf.start[size_t(a.id)] != t1.start[i] || tf.end[size_t(a.id)] != t1.end[i]) {
      if (++differ <= 3)
        ADD_FAILURE() << schedule::describe(s1, b.id) << ": full " << tf.start[size_t(a.id)] << " .. "
                      << tf.end[size_t(a.id)] << ", one replica " << t1.start[i] << " .. " << t1.end[i];
    }
  }
  EXPECT_EQ(differ, 0);
  // The other replicas' ops take replica 0's times (the symmetry the shortcut relies on).
  const double step_full = *std::max_element(tf.end.begin(), tf.end.end());
  const double step_one = *std::max_element(t1.end.begin(), t1.end.end());
  EXPECT_EQ(step_full, step_one);

  const auto rf = pipeline::simulate_schedule(e, full, topo, EngineKind::analytic).report;
  const auto r1 = pipeline::simulate_schedule(e, *one, topo, EngineKind::analytic).report;
  EXPECT_EQ(rf.step_time_s, r1.step_time_s);
  EXPECT_EQ(rf.gpus, r1.gpus);
  EXPECT_EQ(rf.tokens_per_s, r1.tokens_per_s);
  // Sums over every op: the full step adds the replicas' equal terms interleaved, the
  // shortcut multiplies replica 0's sum by dp. Equal to the printed digit, not the bit.
  EXPECT_DOUBLE_EQ(rf.model_flops, r1.model_flops);
  EXPECT_DOUBLE_EQ(rf.executed_flops, r1.executed_flops);
  EXPECT_DOUBLE_EQ(rf.mfu, r1.mfu);
  EXPECT_DOUBLE_EQ(rf.hfu, r1.hfu);
  for (auto [x, y] : {std::pair{rf.breakdown.mean, r1.breakdown.mean}, {rf.breakdown.min, r1.breakdown.min},
                      {rf.breakdown.max, r1.breakdown.max}}) {
    EXPECT_DOUBLE_EQ(x.compute_s, y.compute_s);
    EXPECT_DOUBLE_EQ(x.exposed_comm_s, y.exposed_comm_s);
    EXPECT_DOUBLE_EQ(x.idle_s, y.idle_s);
  }
  EXPECT_EQ(rf.imbalance.worker, r1.imbalance.worker);
  EXPECT_EQ(rf.imbalance.step, r1.imbalance.step);
  EXPECT_EQ(rf.critical_path.length_s, r1.critical_path.length_s);
  // bound_by counts every replica under the shortcut too (symmetry_bound_by_test.cpp compares it in full).
  ASSERT_TRUE(rf.bound_by.has_value() && r1.bound_by.has_value());
  EXPECT_EQ(report::brief(*rf.bound_by), report::brief(*r1.bound_by));
}

// One spine: ECMP has one choice, so the routes translate; every replica's cross-rail
// hops share the rail switches' (oversubscribed) uplinks, which the translation fixes.
const std::vector<std::string> kRail = {"cluster.fabric.kind=rail_optimized", "cluster.fabric.spines=1",
                                        "cluster.fabric.uplink_bandwidth_Gbps=100"};
const std::vector<std::string> kLeafSpine = {"cluster=h100-8x8-ndr", "cluster.fabric.spines=1",
                                             "cluster.fabric.nodes_per_leaf=2", "cluster.fabric.uplink_bandwidth_Gbps=400"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Symmetry, AttentionScopesOnOneSwitch) {
  for (const char* scope : {"attention_fwd", "attention_fwd_bwd", "layer"})
    for (const auto& d : std::vector<std::vector<std::string>>{{"parallel.dp=2", "parallel.cp=4"},
                                                               {"parallel.dp=4", "parallel.cp=2", "parallel.hp=2"},
                                                               {"parallel.dp=2", "parallel.cp=2", "parallel.tp=2"}})
      expect_exact(with(d, {std::string("scope=") + scope}));
}

TEST(Symmetry, StepEveryZeroStage) {
  for (int zero = 0; zero <= 3; ++zero)
    expect_exact({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=" + std::to_string(zero)});
  expect_exact({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.hp=2", "parallel.zero_stage=1"});
  expect_exact({"scope=step", "parallel.dp=4", "parallel.cp=8"});
  expect_exact({"scope=step", "parallel.dp=2", "parallel.cp=2", "parallel.tp=2", "parallel.hp=2", "parallel.zero_stage=3"});
  expect_exact({"scope=step", "parallel.dp=3", "parallel.cp=2", "parallel.tp=1", "cluster.nodes=3",
                "cluster.gpus_per_node=2", "cluster.nics_per_node=2"});
}

TEST(Symmetry, RailOptimisedSpinesSharedByReplicas) {
  // The replicas' cross-rail hops share the oversubscribed spine uplinks: weights > 1.
  expect_exact(with({"scope=step", "parallel.dp=2", "parallel.cp=16", "parallel.zero_stage=2"}, kRail));
  expect_exact(with({"scope=attention_fwd_bwd", "parallel.dp=4", "parallel.cp=8", "parallel.ring=ring"}, kRail));
  expect_exact(with({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.hp=2", "parallel.tp=2"}, kRail));
}

TEST(Symmetry, LeafSpineAndMesh) {
  expect_exact(with({"scope=step", "parallel.dp=4", "parallel.cp=16"}, kLeafSpine));
  expect_exact(with({"scope=attention_fwd_bwd", "parallel.dp=2", "parallel.cp=16", "parallel.hp=2"}, kLeafSpine));
  // DGX-1's hybrid cube mesh: NVLinks and PCIe (mesh pairs without NVLink go through the host).
  // (its GPU set to an A100's figures: the kernel tables have no V100 entry).
  const std::vector<std::string> dgx1 = {"cluster=v100-dgx1-1x8", "cluster.gpu.model=A100-SXM4-80GB",
                                         "cluster.gpu.peak_tflops_bf16=312", "kernel.attention=fa2",
                                         "workload.pattern=dense-causal"};
  expect_exact(with({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=3"}, dgx1));
  // Pairs of GPUs: 1 -> 2 is one NVLink, its translate 3 -> 4 is not: refused.
  pipeline::Session session;
  std::string why;
  EXPECT_FALSE(session.one_replica_schedule(load(with({"scope=step", "parallel.dp=4", "parallel.cp=2"}, dgx1)), why));
  EXPECT_NE(why.find("route 1 -> 2"), std::string::npos) << why;
}

TEST(Symmetry, RefusesWhereRoutesAreNotTranslates) {
  pipeline::Session session;
  std::string why;
  // dp = 1: nothing to fold.
  EXPECT_FALSE(session.one_replica_schedule(load({"parallel.dp=1", "parallel.cp=4"}), why));
  EXPECT_NE(why.find("dp = 1"), std::string::npos) << why;
  // Replicas of 4 GPUs on nodes of 8: replica 0 -> 1 stays on node 0, 1 -> 2 crosses nodes.
  const Experiment e = load({"scope=step", "parallel.dp=3", "parallel.cp=4", "cluster.nodes=2"});
  EXPECT_FALSE(session.one_replica_schedule(e, why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(session.one_replica_schedule(load({"scope=step", "parallel.dp=4", "parallel.cp=2", "parallel.hp=2"}), why));
  EXPECT_NE(why.find("translate"), std::string::npos) << why;
  // Two spines: ECMP hashes the GPU pair, so a pair and its translate may cross different spines.
  EXPECT_FALSE(session.one_replica_schedule(
      load({"scope=step", "parallel.dp=2", "parallel.cp=16", "cluster.fabric.kind=rail_optimized",
            "cluster.fabric.spines=2", "cluster.fabric.uplink_bandwidth_Gbps=100"}),
      why));
  EXPECT_NE(why.find("spine"), std::string::npos) << why;
  // The engine refuses a folded route that is not a translate, rather than run it.
  auto s = generate::generate_step(e, session.patterns(e), session.topology(e), nullptr, generate::Replicas::one);
  EXPECT_THROW(run_analytic(s, session.topology(e), cost::CostModel::for_experiment(e)), schedule::ScheduleError);
  // SimGrid refuses it too (symmetry_simgrid_test.cpp); files never hold one.
  EXPECT_THROW(simulate(s, session.topology(e), cost::CostModel::for_experiment(e), EngineKind::simgrid),
               schedule::ScheduleError);
  EXPECT_THROW(schedule::to_schedule_json(s), schedule::ScheduleError);
}

TEST(Symmetry, ReplicatedPlanIsTheFullPlansReplicaZeroPart) {
  // The spanning plan against the full plan filtered by hand: the transfers from
  // replica 0, each dependency on another replica's transfer mapped to its image.
  for (auto kind : {schedule::OpKind::all_gather, schedule::OpKind::reduce_scatter, schedule::OpKind::all_reduce,
                    schedule::OpKind::all_to_all})
    for (int n : {1, 2, 3})
      for (int replicas : {2, 3, 4}) {
        const int N = n * replicas;
        const auto full = cost::plan_collective(kind, N, 1000.0, 0);
        const auto part = cost::plan_collective(schedule::CallShapeKey{kind, n, replicas, 1000, 0});
        std::vector<int32_t> index(full.size(), -1);  // full transfer -> its image in part
        std::vector<size_t> kept;
        for (size_t j = 0; j < full.size(); ++j)
          if (full[j].src < n) index[j] = int32_t(kept.size()), kept.push_back(j);
        for (size_t j = 0; j < full.size(); ++j)
          if (full[j].src >= n) {  // image: the same stage, source src mod n
            const size_t k = j - size_t(full[j].src) + size_t(full[j].src % n);
            index[j] = index[k];
          }
        ASSERT_EQ(part.size(), kept.size());
        for (size_t i = 0; i < kept.size(); ++i) {
          const auto& f = full[kept[i]];
          EXPECT_EQ(part[i].src, f.src);
          EXPECT_EQ(part[i].dst, f.dst);
          EXPECT_EQ(part[i].bytes, f.bytes);
          for (int d = 0; d < 2; ++d)
            EXPECT_EQ(part[i].deps[size_t(d)], f.deps[size_t(d)] < 0 ? -1 : index[size_t(f.deps[size_t(d)])]);
        }
      }
  EXPECT_THROW(cost::plan_collective(schedule::CallShapeKey{schedule::OpKind::broadcast, 2, 2, 1, 0}),
               std::invalid_argument);
}

TEST(Symmetry, WeightedFlowIsItsCopies) {
  // Link 0 (3 B/s) shared, link 1 (1 B/s) on one flow's path: a flow of weight 2 on
  // link 0 stands for two copies of itself there, as the translates under the shortcut do.
  const std::vector<double> cap{3.0, 1.0, 10.0};
  FlowNetwork copies(cap), weighted(cap);
  const std::vector<int> a{0, 2}, b{0, 1};
  const int32_t c1 = copies.start(a, 6.0, 0.0), c2 = copies.start(a, 6.0, 0.0), c3 = copies.start(b, 2.0, 0.0);
  const std::vector<int32_t> w{2, 1};
  const int32_t f = weighted.start(a, w, 6.0, 0.0), g = weighted.start(b, 2.0, 0.0);
  EXPECT_EQ(copies.rate(c1), weighted.rate(f));
  EXPECT_EQ(copies.rate(c2), weighted.rate(f));
  EXPECT_EQ(copies.rate(c3), weighted.rate(g));
  EXPECT_EQ(weighted.rate(f), 1.0);  // max-min: b's 1 B/s leaves 2 B/s to the two copies
  EXPECT_EQ(copies.end_time(c3), weighted.end_time(g));
  copies.finish(c3, 2.0), weighted.finish(g, 2.0);
  EXPECT_EQ(copies.end_time(c1), weighted.end_time(f));  // 4 B left at 1.5 B/s each
  EXPECT_EQ(weighted.rate(f), 1.5);
  EXPECT_THROW(weighted.start(a, std::vector<int32_t>{1}, 1.0, 0.0), std::invalid_argument);
}

TEST(Symmetry, ValidationChecksTheAnnotation) {
  const Experiment e = load({"parallel.dp=2", "parallel.cp=2"});
  pipeline::Session session;
  std::string why;
  auto s = session.one_replica_schedule(e, why);
  ASSERT_TRUE(s) << why;
  EXPECT_NO_THROW(schedule::validate(*s));
  auto bad = *s;
  bad.symmetry.ranks_per_replica = 3;
  EXPECT_THROW(schedule::validate(bad), schedule::ScheduleError);
}

}  // namespace
}  // namespace rm::engine
