// Both engines on schedules whose answer is computed by hand, and their
// agreement on contention-free schedules.
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/cost/collective_plan.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "tests/support/engine_printers.hpp"
#include "tests/support/synthetic_schedules.hpp"
#include "traces/chrome_trace.hpp"

namespace rm::engine {
namespace {

using schedule::OpKind;
using schedule::StreamKind;

// a100-40g-4x8-hdr: NVSwitch route = 2 links, 2 us, 300 GB/s x 0.80 = 240e9 B/s;
// launch 5 us; attention at the block_sparse table's rate (attn_rate()).
constexpr double kLat = 2e-6, kRate = 240e9, kLaunch = 5e-6;

struct Env {
  Cluster cluster;
  topology::Topology topo;
  cost::CostModel model;
  explicit Env(const std::string& name) : cluster(load(name)), topo(cluster), model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu)) {}
  static Cluster load(const std::string& name) {
    auto c = ConfigStore().load("clusters", name, "test");
    return parse_cluster(JsonReader(c.json, c.source));
  }
};

const Env& a100() {
  static const Env env("a100-40g-4x8-hdr");
  return env;
}

// The rate of a descriptor-less forward attention op (causal, 0 tokens: the table's first point).
double attn_rate() { return a100().model.attention_tflops(false, true, 0) * 1e12; }

class Engines : public ::testing::TestWithParam<EngineKind> {
 protected:
  traces::Timeline run(const schedule::Schedule& s) { return simulate(s, a100().topo, a100().model, GetParam()); }
};

const traces::Event& event(const traces::Timeline& tl, int64_t op) {
  for (const auto& e : tl.events)
    if (e.op == op) return e;
  throw std::out_of_range("no event");
}

TEST_P(Engines, TwoRanksExchangeAKnownMessage) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra);
  const auto ids = b.p2p({0, 0, 1, 0, 240'000'000, {}, 0});
  const auto tl = run(std::move(b).build());
  const double t = kLat + 240e6 / kRate;  // 1.002 ms
  EXPECT_NEAR(event(tl, ids.send).end_s, t, t * 1e-6);
  EXPECT_NEAR(event(tl, ids.recv).end_s, t, t * 1e-6);
  EXPECT_EQ(event(tl, ids.recv).start_s, 0.0);
}

TEST_P(Engines, RecvWaitsForALateSender) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const auto work = b.compute(0, 0, OpKind::attn_fwd, {}, {attn_rate() * 1e-3, 0, 0});
  const auto ids = b.p2p({0, 1, 1, 1, 24'000'000, {}, 0});
  b.add_dep(ids.send, work);
  const auto tl = run(std::move(b).build());
  const double start = 1e-3 + kLaunch, t = start + kLat + 24e6 / kRate;
  EXPECT_NEAR(event(tl, ids.send).start_s, start, 1e-9);
  EXPECT_EQ(event(tl, ids.recv).start_s, 0.0);
  EXPECT_NEAR(event(tl, ids.recv).end_s, t, t * 1e-6);
}

// 4-rank ring, steps S: compute C per step, exchange T per step, overlapped.
// Compute-bound (C > T): S*C. Transfer-bound (T > C): (S-1)*T + C.
TEST_P(Engines, RingOfFourComputeBound) {
  const double c = 1e-3 + kLaunch, t = kLat + 24e6 / kRate;  // T = 0.102 ms
  const auto tl = run(ring_schedule({4, 0, 5, attn_rate() * 1e-3, 24'000'000}));
  EXPECT_NEAR(tl.makespan_s(), 5 * c, 5 * c * 1e-6);
  EXPECT_LT(t, c);
}

TEST_P(Engines, RingOfFourTransferBound) {
  const double c = 1e-4 + kLaunch, t = kLat + 240e6 / kRate;
  const auto tl = run(ring_schedule({4, 0, 5, attn_rate() * 1e-4, 240'000'000}));
  EXPECT_NEAR(tl.makespan_s(), 4 * t + c, (4 * t + c) * 1e-6);
}

TEST_P(Engines, RingAllReduceTakesTheNcclFormulaTime) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 4; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra);
  const int g = b.add_group({0, 1, 2, 3});
  const auto ids = b.collective(g, OpKind::all_reduce, 400'000'000, {}, StreamKind::comm_intra);
  const auto tl = run(std::move(b).build());
  const double t = cost::collective_seconds(OpKind::all_reduce, 4, 4e8, kLat, kRate);
  EXPECT_NEAR(t, 6 * (kLat + 1e8 / kRate), 1e-15);
  for (auto id : ids) EXPECT_NEAR(event(tl, id).end_s, t, t * 1e-6);
}

TEST_P(Engines, CollectiveStartsWhenTheLastMemberArrives) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 3; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const auto late = b.compute(2, 0, OpKind::gemm, {}, {312e12 * 0.65 * 1e-3, 0, 0});
  const int g = b.add_group({0, 1, 2});
  const auto ids = b.collective(g, OpKind::all_gather, 300'000'000, {}, StreamKind::comm_intra);
  b.add_dep(ids[2], late);
  const auto tl = run(std::move(b).build());
  const double t = 1e-3 + kLaunch + cost::collective_seconds(OpKind::all_gather, 3, 3e8, kLat, kRate);
  for (auto id : ids) EXPECT_NEAR(event(tl, id).end_s, t, t * 1e-6);
}

TEST_P(Engines, SameInputSameTimelineByteForByte) {
  const auto s = random_schedule({7, 6, 150});
  EXPECT_EQ(traces::to_chrome_json(run(s)), traces::to_chrome_json(run(s)));
}

TEST_P(Engines, RefusesAScheduleThatDeadlocks) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra);
  b.p2p({0, 0, 1, 0, 1000, {}, 0});
  b.p2p({1, 0, 0, 0, 1000, {}, 1});
  // Each rank sends first: rank 0's send waits for rank 1's recv, which is
  // behind rank 1's send, which waits for rank 0's recv.
  schedule::Schedule s = b.peek();
  std::swap(s.ops[1].id, s.ops[2].id);
  std::swap(s.ops[1], s.ops[2]);
  try {
    run(s);
    FAIL() << "expected a ScheduleError";
  } catch (const schedule::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("never runs"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Both, Engines, ::testing::Values(EngineKind::analytic, EngineKind::simgrid),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// Contention-free: a 16-rank ring over two nodes (each GPU has its own NIC)
// with its all-gather and all-to-all-free collectives on disjoint hops.
TEST(EnginesAgree, WithinOnePercentOnContentionFreeSchedules) {
  const auto& env = a100();
  for (const auto& s : {ring_schedule({16, 0, 6, attn_rate() * 2e-4, 64'000'000}),
                        ring_schedule({8, 4, 4, attn_rate() * 1e-3, 8'000'000})}) {
    const auto a = simulate(s, env.topo, env.model, EngineKind::analytic);
    const auto g = simulate(s, env.topo, env.model, EngineKind::simgrid);
    ASSERT_EQ(a.events.size(), g.events.size());
    EXPECT_NEAR(a.makespan_s(), g.makespan_s(), 0.01 * a.makespan_s());
    for (size_t i = 0; i < a.events.size(); ++i) {
      EXPECT_EQ(a.events[i].op, g.events[i].op);
      EXPECT_NEAR(a.events[i].end_s, g.events[i].end_s, 0.01 * a.makespan_s()) << "op " << a.events[i].op;
    }
  }
}

TEST(EngineKindNames, RoundTrip) {
  for (auto k : {EngineKind::analytic, EngineKind::simgrid}) EXPECT_EQ(parse_engine_kind(to_string(k)), k);
  EXPECT_FALSE(parse_engine_kind("ns3"));
}

}  // namespace
}  // namespace rm::engine
