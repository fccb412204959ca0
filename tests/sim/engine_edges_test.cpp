// The typed edges engines put in their Timelines: counts on a ring worked out
// by hand, each collective's star, what every edge kind promises on random
// schedules under both engines, the critical path surviving a Chrome round
// trip, and the event names.
#include <gtest/gtest.h>

#include <map>

#include "sim/config/config_store.hpp"
#include "sim/engine/engine.hpp"
#include "tests/support/synthetic_schedules.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/schedule/builder.hpp"
#include "traces/chrome_trace.hpp"

namespace rm::engine {
namespace {

using schedule::OpKind;
using schedule::StreamKind;
using traces::EdgeKind;

std::map<EdgeKind, int> count(const std::vector<traces::Edge>& edges) {
  std::map<EdgeKind, int> n;
  for (const auto& e : edges) ++n[e.kind];
  return n;
}

TEST(EngineEdges, RingCountsByHand) {
  // R = 4 ranks, S = 5 steps. Per rank: the compute stream's S attn_fwd, each
  // after the previous (S-1 stream edges) and, from step 1, after the last
  // recv (S-1 dependency edges); the comm stream's S-1 runs of a joined
  // send+recv, each run after the previous one's 2 ops (4 (S-2) stream edges)
  // and, from step 1, both ops after the last recv (2 (S-2) dependency edges).
  // One p2p edge per exchange: R (S-1).
  const int R = 4, S = 5;
  const auto s = ring_schedule({R, 0, S, 1e9, 1 << 20});
  const auto n = count(timeline_edges(s, schedule::RunPlan(s)));
  EXPECT_EQ(n.at(EdgeKind::stream), R * ((S - 1) + 4 * (S - 2)));
  EXPECT_EQ(n.at(EdgeKind::dependency), R * ((S - 1) + 2 * (S - 2)));
  EXPECT_EQ(n.at(EdgeKind::p2p), R * (S - 1));
  EXPECT_FALSE(n.count(EdgeKind::collective));
}

TEST(EngineEdges, ACollectiveIsAStarFromItsFirstMemberAndAJoinedRunSharesItsDeps) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 4; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const auto w = b.compute(0, 0, OpKind::gemm, {}, {1e9, 0, 0});             // 0
  const int g = b.add_group({2, 0, 3, 1});
  const auto ids = b.collective(g, OpKind::all_reduce, 1 << 20, {}, StreamKind::comm_intra);  // 1..4: ranks 2 0 3 1
  const auto p = b.p2p({0, 1, 1, 1, 1 << 20, {}, 7});                        // 5 send on r0, 6 recv on r1
  const auto q = b.p2p({1, 1, 0, 1, 1 << 20, {}, 8});                        // 7 send on r1, 8 recv on r0
  const std::array<schedule::OpId, 2> on0{p.send, q.recv};
  b.launch_together(on0);
  b.add_dep(q.recv, w);  // the joined op's dependency gates its whole run
  const auto s = std::move(b).build();
  const auto edges = timeline_edges(s, schedule::RunPlan(s));
  std::vector<traces::Edge> star, into_run;
  for (const auto& e : edges) {
    if (e.kind == EdgeKind::collective) star.push_back(e);
    if (e.kind == EdgeKind::dependency) into_run.push_back(e);
  }
  EXPECT_EQ(star, (std::vector<traces::Edge>{{ids[0], ids[1], EdgeKind::collective},
                                             {ids[0], ids[2], EdgeKind::collective},
                                             {ids[0], ids[3], EdgeKind::collective}}));
  EXPECT_EQ(into_run, (std::vector<traces::Edge>{{w, p.send, EdgeKind::dependency}, {w, q.recv, EdgeKind::dependency}}));
}

struct Env {
  Cluster cluster;
  topology::Topology topo;
  cost::CostModel model;
  Env() : cluster(load()), topo(cluster), model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu)) {}
  static Cluster load() {
    auto c = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
    return parse_cluster(JsonReader(c.json, c.source));
  }
};

const Env& env() {
  static const Env e;
  return e;
}

class EdgesOnRandomSchedules : public ::testing::TestWithParam<EngineKind> {};

TEST_P(EdgesOnRandomSchedules, EveryKindHoldsWhatItSays) {
  std::map<EdgeKind, int> seen;
  for (uint64_t seed = 1; seed <= (GetParam() == EngineKind::analytic ? 12u : 3u); ++seed) {
    const auto s = random_schedule({seed, 6, 150});
    const auto tl = simulate(s, env().topo, env().model, GetParam());
    const auto m = schedule::match_comms(s);
    std::vector<const traces::Event*> ev(s.ops.size());
    for (const auto& e : tl.events) ev[size_t(e.op)] = &e;
    for (const auto& e : tl.edges) {
      ++seen[e.kind];
      const auto &from = *ev[size_t(e.from)], &to = *ev[size_t(e.to)];
      const auto &a = s.ops[size_t(e.from)], &b = s.ops[size_t(e.to)];
      switch (e.kind) {
        case EdgeKind::stream:
          EXPECT_TRUE(a.rank == b.rank && a.stream == b.stream && a.id < b.id) << a.id << " -> " << b.id;
          EXPECT_LE(from.end_s, to.start_s + 1e-12) << a.id << " -> " << b.id;
          break;
        case EdgeKind::dependency: EXPECT_LE(from.end_s, to.start_s + 1e-12) << a.id << " -> " << b.id; break;
        case EdgeKind::p2p:
          EXPECT_TRUE(a.kind == OpKind::send && m.partner[size_t(a.id)] == b.id) << a.id << " -> " << b.id;
          EXPECT_EQ(from.end_s, to.end_s);
          break;
        case EdgeKind::collective:
          EXPECT_EQ(m.call_of[size_t(a.id)], m.call_of[size_t(b.id)]);
          EXPECT_EQ(m.calls[size_t(m.call_of[size_t(a.id)])].front(), a.id);
          // The call starts once all are posted: each member ends after every member's start.
          EXPECT_GE(to.end_s, from.start_s);
          EXPECT_GE(from.end_s, to.start_s);
          break;
        case EdgeKind::launch:
        case EdgeKind::sync: ADD_FAILURE() << "an engine emitted an importer-only edge kind"; break;
      }
    }
    // Every explicit dependency is an edge, once.
    std::map<std::pair<int64_t, int64_t>, int> dep_edges;
    for (const auto& e : tl.edges)
      if (e.kind == EdgeKind::dependency) ++dep_edges[{e.from, e.to}];
    for (const auto& op : s.ops)
      for (auto d : op.deps) EXPECT_EQ((dep_edges[{d, op.id}]), 1) << d << " -> " << op.id;
  }
  EXPECT_EQ(seen.size(), size_t(traces::kScheduleEdgeKindCount));
}

INSTANTIATE_TEST_SUITE_P(Engines, EdgesOnRandomSchedules, ::testing::Values(EngineKind::analytic, EngineKind::simgrid),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST(EngineEdges, CriticalPathIsTheSameAfterAChromeRoundTrip) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const auto s = random_schedule({seed, 5, 200});
    const auto tl = simulate(s, env().topo, env().model, EngineKind::analytic);
    const auto back = traces::from_chrome_json(traces::to_chrome_json(tl), "mem");
    ASSERT_EQ(back.edges, tl.edges);
    const auto a = report::critical_path(s, tl), b = report::critical_path(s, back);
    EXPECT_EQ(a.ops, b.ops) << "seed " << seed;
    EXPECT_NEAR(a.length_s, b.length_s, 1e-12);
    EXPECT_GT(a.ops.size(), 1u);
    // Without edges there is no graph to walk: the path is the last op alone.
    auto bare = tl;
    bare.edges.clear();
    EXPECT_EQ(report::critical_path(s, bare).ops.size(), 1u);
  }
}

TEST(EngineEdges, EventNamesCarryLayerAndStep) {
  schedule::Op op;
  op.kind = OpKind::attn_fwd;
  op.layer = 3;
  op.step = 2;
  EXPECT_EQ(event_name(op), "attn_fwd L3 s2");
  op.step = -1;
  EXPECT_EQ(event_name(op), "attn_fwd L3");
  op.kind = OpKind::reduce_scatter;
  op.layer = -1;
  op.step = 12;
  EXPECT_EQ(event_name(op), "reduce_scatter s12");
  op.step = -1;
  EXPECT_EQ(event_name(op), "reduce_scatter");
  const auto s = ring_schedule({2, 0, 2, 1e9, 1 << 20});
  const auto tl = to_timeline(s, OpTimes{std::vector<double>(s.ops.size(), 0.0), std::vector<double>(s.ops.size(), 1.0)},
                              traces::Source::analytic);
  for (const auto& e : tl.events) {
    EXPECT_EQ(e.name, event_name(s.ops[size_t(e.op)]));
    EXPECT_EQ(e.category, schedule::to_string(s.ops[size_t(e.op)].kind));
  }
}

}  // namespace
}  // namespace rm::engine
