// `ringmaster imbalance` and `simulate` must charge a layer the same attention
// time: imbalance's per-layer sum over ring steps of the slowest rank equals
// the same sum over the Schedule's attn_fwd ops priced by the CostModel.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/imbalance.hpp"

namespace rm::report {
namespace {

using schedule::OpKind;
using schedule::Phase;

Experiment experiment(std::vector<std::string> overrides) {
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", overrides);
}

struct Case {
  const char* name;
  std::vector<std::string> overrides;
};

class ImbalanceMatchesSimulate : public ::testing::TestWithParam<Case> {};

TEST_P(ImbalanceMatchesSimulate, SameAttentionSecondsPerLayerAndSameTransfers) {
  const Experiment e = experiment(GetParam().overrides);
  pipeline::Session session;
  const schedule::Schedule s = session.schedule(e);
  const ImbalanceReport rep = session.imbalance(e, {e.parallel.partition});
  ASSERT_EQ(rep.partitions.size(), 1u);
  const auto& layers = rep.partitions[0].layers;
  ASSERT_EQ(int(layers.size()), e.model.layers);

  const cost::CostModel cost = cost::CostModel::for_experiment(e);
  std::map<std::pair<int, int>, double> slowest;  // (layer, step) -> slowest attn_fwd
  for (const auto& op : s.ops)
    if (op.kind == OpKind::attn_fwd && op.phase == Phase::forward) {
      double& t = slowest[{op.layer, op.step}];
      t = std::max(t, cost.compute_seconds(s, op));
    }
  ASSERT_FALSE(slowest.empty());
  std::map<int, double> per_layer;
  for (const auto& [key, t] : slowest) per_layer[key.first] += t;
  for (const auto& [layer, t] : per_layer) {
    ASSERT_LT(layer, int(layers.size()));
    EXPECT_NEAR(layers[size_t(layer)].step_seconds, t, 1e-12 * t) << "layer " << layer;
    EXPECT_GE(layers[size_t(layer)].step_seconds, layers[size_t(layer)].ideal_seconds * (1 - 1e-12));
  }

  // The same layouts: the slowest K/V transfer of the forward ring is the slowest
  // contention-free send of the schedule's ring streams.
  const topology::Topology topo(e.cluster);
  double kv = 0;
  for (const auto& op : s.ops) {
    const auto* st = s.find_stream(op.rank, op.stream);
    if (op.kind == OpKind::send && op.phase == Phase::forward && st && st->name.rfind("kv_", 0) == 0)
      kv = std::max(kv, cost.transfer_seconds(topo, s.ranks[size_t(op.rank)].gpu, s.ranks[size_t(op.peer)].gpu,
                                              double(s.desc(op).bytes)));
  }
  EXPECT_NEAR(rep.partitions[0].kv_transfer_seconds, kv, 1e-12 * std::max(kv, 1e-30));
}

INSTANTIATE_TEST_SUITE_P(
    Experiments, ImbalanceMatchesSimulate,
    ::testing::Values(
        Case{"default_step", {"workload.seq_len=8k", "model.layers=2"}},
        Case{"zigzag_ring", {"workload.seq_len=8k", "model.layers=1", "scope=attention_fwd", "parallel.ring=ring",
                             "parallel.partition=zigzag"}},
        Case{"double_ring_2d_batch2", {"workload.seq_len=8k", "model.layers=1", "scope=layer", "parallel.hp=2",
                                       "parallel.cp=8", "parallel.ring=double_ring", "parallel.window=4",
                                       "workload.batch=2"}},
        Case{"dense_contiguous", {"workload.seq_len=8k", "model.layers=1", "scope=attention_fwd",
                                  "workload.pattern=dense-causal", "parallel.partition=contiguous", "parallel.cp=8",
                                  "parallel.ring=ring"}}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(Imbalance, DenseZigzagIsIdealAndContiguousIsNot) {
  // Dense causal on a ring of 8: zigzag gives every rank the same work at every
  // step, so the slowest rank's time is the balanced one; contiguous leaves the
  // last rank (2cp-1)/cp of the mean and steps where rank 0 does nothing.
  const Experiment e = experiment({"workload.seq_len=8k", "model.layers=1", "workload.pattern=dense-causal",
                                   "cluster=h200-1x8", "parallel.cp=8", "parallel.ring=ring"});
  pipeline::Session session;
  const auto rep = session.imbalance(e, {Partition::zigzag, Partition::contiguous});
  ASSERT_EQ(rep.partitions.size(), 2u);
  EXPECT_NEAR(rep.partitions[0].ideal_fraction, 1.0, 1e-12);
  EXPECT_EQ(rep.partitions[0].total.transfer_steps, 7);
  EXPECT_LT(rep.partitions[1].ideal_fraction, 0.7);  // 0.53 = cp/(2cp-1) at long sequences; launches even it out
  EXPECT_NEAR(rep.partitions[1].total.ideal_seconds, rep.partitions[0].total.ideal_seconds,
              1e-9 * rep.partitions[0].total.ideal_seconds);  // the same total work, balanced
}

}  // namespace
}  // namespace rm::report
