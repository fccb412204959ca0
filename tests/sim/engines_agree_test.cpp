// The two engines agree under contention: the analytic engine's max-min fair
// FlowNetwork against SimGrid on reduced-size versions of the shipped
// experiments (every scope) and on multi-node cases whose flows share
// rail-to-spine uplinks. Full-size figures: docs/engines.md.
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "tests/support/engine_printers.hpp"

namespace rm::engine {
namespace {

struct Case {
  std::string name;
  std::string experiment;  // "" = the default experiment
  std::vector<std::string> sets;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class EnginesAgreeUnderContention : public ::testing::TestWithParam<Case> {};

TEST_P(EnginesAgreeUnderContention, WithinThreePercent) {
  const Experiment e = load_experiment(ConfigStore(), GetParam().experiment, GetParam().sets);
  pipeline::Session session;
  const auto s = session.schedule(e);
  const topology::Topology topo(e.cluster);
  const auto m = cost::CostModel::for_experiment(e);
  const double a = simulate(s, topo, m, EngineKind::analytic).makespan_s();
  const double g = simulate(s, topo, m, EngineKind::simgrid).makespan_s();
  EXPECT_NEAR(a, g, 0.03 * g) << GetParam().name << ": analytic " << a << " s, simgrid " << g << " s";
}

// 4 nodes of the rail-optimised a100-80g cluster (4 spines): the CP ring's
// inter-node hops and ZeRO's all-gathers cross shared uplinks.
const std::vector<std::string> kRails{"cluster=a100-80g-8x8-hdr", "cluster.nodes=4", "model=llama3-8b", "model.layers=2",
                                      "workload.seq_len=16k", "workload.pattern=dense-causal", "parallel.cp=32",
                                      "parallel.ring=ring", "parallel.partition=zigzag"};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* scope : {"attention_fwd", "attention_fwd_bwd", "layer", "step"}) {
    out.push_back({std::string("mtraining_") + scope, "", {"workload.seq_len=32k", "model.layers=2", std::string("scope=") + scope}});
    out.push_back({std::string("loongtrain_") + scope, "loongtrain-llama2-7b-1m",
                   {"workload.seq_len=64k", "model.layers=2", std::string("scope=") + scope}});
  }
  auto rails = [&](std::string name, std::vector<std::string> more) {
    std::vector<std::string> sets = kRails;
    sets.insert(sets.end(), more.begin(), more.end());
    out.push_back({std::move(name), "", std::move(sets)});
  };
  rails("rails_cp_ring_fwd", {"scope=attention_fwd"});
  rails("rails_cp_ring_step_zero1", {"scope=step"});
  rails("rails_zero3_step", {"scope=step", "parallel.zero_stage=3"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Reduced, EnginesAgreeUnderContention, ::testing::ValuesIn(cases()),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace rm::engine
