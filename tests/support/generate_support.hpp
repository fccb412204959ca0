// Shared helpers of the generator tests: small experiments, hand-made
// sparsity models, and per-rank tallies of a Schedule's ops.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/generate/generate.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/topology/topology.hpp"
#include "tests/support/op_descs.hpp"

namespace rm::generate::testing {

// The default experiment, made small (2 layers, 8K tokens, dense pattern), then `overrides`.
inline Experiment small_experiment(std::vector<std::string> overrides) {
  std::vector<std::string> all{"workload.seq_len=8192", "workload.pattern=dense-causal", "model.layers=2",
                               "parallel.cp=1", "parallel.hp=1", "parallel.ring=ring", "parallel.partition=contiguous"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", all);
}

inline sparsity::SparsityModel model_of(const Experiment& e, sparsity::HeadPattern p, bool dynamic = false) {
  auto shared = std::make_shared<const sparsity::HeadPattern>(std::move(p));
  return {"test", e.model.layers, e.model.heads, e.workload.seq_len, dynamic,
          std::vector<std::shared_ptr<const sparsity::HeadPattern>>(size_t(e.model.layers * e.model.heads), shared)};
}

inline sparsity::HeadPattern vertical_slash_pattern() {
  using sparsity::Interval;
  using sparsity::IntervalSet;
  return sparsity::HeadPattern::vertical_slash(IntervalSet({{0, 30}, {1000, 1010}, {4100, 4101}}),
                                               IntervalSet({{0, 100}, {512, 520}, {3000, 3001}}));
}

struct Generated {
  Experiment e;
  sparsity::SparsityModel m;
  topology::Topology topo;
  schedule::Schedule s;
};

inline Generated generate(const Experiment& e, sparsity::SparsityModel m) {
  topology::Topology topo(e.cluster);
  auto s = generate_step(e, m, topo);
  return {e, std::move(m), std::move(topo), std::move(s)};
}

// Ops of one kind (and phase, when given) on a rank.
inline int count(const schedule::Schedule& s, int rank, schedule::OpKind kind, int phase = -1) {
  int n = 0;
  for (const auto& op : s.ops)
    if (op.rank == rank && op.kind == kind && (phase < 0 || int(op.phase) == phase)) ++n;
  return n;
}

// `lean` (ops generated with Accesses::none, naming entries of lean_descs) is
// `whole`'s ops one for one, each with access -1.
inline void expect_ops_without_accesses(const schedule::Schedule& whole, std::span<const schedule::Op> lean,
                                        std::span<const schedule::OpDesc> lean_descs) {
  ASSERT_EQ(lean.size(), whole.ops.size());
  for (size_t i = 0; i < lean.size(); ++i) {
    rm::testing::ResolvedOp want = rm::testing::resolved(whole, whole.ops[i]);
    want.d.access = -1;
    ASSERT_TRUE(rm::testing::resolved(lean[i], lean_descs) == want) << schedule::describe(whole, schedule::OpId(i));
  }
}

}  // namespace rm::generate::testing
