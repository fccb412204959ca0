// Invariants every engine Timeline must hold, on random valid schedules.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/config/config_store.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "tests/support/engine_printers.hpp"
#include "tests/support/synthetic_schedules.hpp"

namespace rm::engine {
namespace {

struct Case {
  EngineKind engine;
  uint64_t seed;
};

void PrintTo(const Case& c, std::ostream* os) { *os << to_string(c.engine) << " seed " << c.seed; }

class Invariants : public ::testing::TestWithParam<Case> {};

TEST_P(Invariants, HoldOnRandomSchedules) {
  auto cfg = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
  const Cluster cluster = parse_cluster(JsonReader(cfg.json, cfg.source));
  const topology::Topology topo(cluster);
  const cost::CostModel model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu));
  // SimGrid is the slower engine: a smaller schedule keeps the test fast under ASan.
  const auto s = random_schedule({GetParam().seed, 6, GetParam().engine == EngineKind::analytic ? 400 : 150});
  const auto tl = simulate(s, topo, model, GetParam().engine);
  ASSERT_EQ(tl.events.size(), s.ops.size());
  std::vector<const traces::Event*> by_op(s.ops.size());
  for (const auto& e : tl.events) by_op[static_cast<size_t>(e.op)] = &e;
  constexpr double eps = 1e-12;
  for (const auto& op : s.ops) {
    const auto& e = *by_op[static_cast<size_t>(op.id)];
    EXPECT_GE(e.start_s, 0.0);
    EXPECT_LE(e.start_s, e.end_s);
    for (auto d : op.deps) EXPECT_GE(e.start_s, by_op[static_cast<size_t>(d)]->end_s - eps) << schedule::describe(s, op.id);
    if (schedule::is_compute(op.kind)) {
      EXPECT_NEAR(e.end_s - e.start_s, model.compute_seconds(s, op), 1e-9) << schedule::describe(s, op.id);
    }
  }
  // A stream runs one run at a time: a non-joined op starts after every earlier op of its stream ended.
  for (const auto& r : s.ranks)
    for (const auto& st : r.streams) {
      double prev_end = 0;
      double run_start = -1;
      for (const auto& op : s.ops) {
        if (op.rank != r.id || op.stream != st.id) continue;
        const auto& e = *by_op[static_cast<size_t>(op.id)];
        if (op.joined) {
          EXPECT_EQ(e.start_s, run_start) << schedule::describe(s, op.id);
        } else {
          EXPECT_GE(e.start_s, prev_end - eps) << schedule::describe(s, op.id);
          run_start = e.start_s;
        }
        prev_end = std::max(prev_end, e.end_s);
      }
    }
  // Matched send/recv end together, no sooner than the transfer alone would take.
  const auto m = schedule::match_comms(s);
  int64_t sent = 0, received = 0;
  for (const auto& op : s.ops) {
    if (!schedule::is_p2p(op.kind)) continue;
    (op.kind == schedule::OpKind::send ? sent : received) += s.desc(op).bytes;
    const auto& e = *by_op[static_cast<size_t>(op.id)];
    const auto& p = *by_op[static_cast<size_t>(m.partner[static_cast<size_t>(op.id)])];
    EXPECT_DOUBLE_EQ(e.end_s, p.end_s);
    if (op.kind == schedule::OpKind::send) {
      EXPECT_GE(e.end_s - std::max(e.start_s, p.start_s),
                model.transfer_seconds(topo, s.ranks[size_t(op.rank)].gpu, s.ranks[size_t(op.peer)].gpu, double(s.desc(op).bytes)) - eps);
    }
  }
  EXPECT_EQ(sent, received);
  // A collective member ends no sooner than the last member started.
  for (const auto& call : m.calls) {
    double last_start = 0;
    for (auto id : call) last_start = std::max(last_start, by_op[static_cast<size_t>(id)]->start_s);
    for (auto id : call) EXPECT_GE(by_op[static_cast<size_t>(id)]->end_s, last_start);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (uint64_t seed = 1; seed <= 6; ++seed) out.push_back({EngineKind::analytic, seed});
  for (uint64_t seed = 1; seed <= 3; ++seed) out.push_back({EngineKind::simgrid, seed});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Random, Invariants, ::testing::ValuesIn(cases()), [](const auto& p) {
  return std::string(to_string(p.param.engine)) + "_seed" + std::to_string(p.param.seed);
});

}  // namespace
}  // namespace rm::engine
