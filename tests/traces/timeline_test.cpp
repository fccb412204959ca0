#include "traces/timeline.hpp"

#include <gtest/gtest.h>

#include "traces/timeline_join.hpp"

namespace rm::traces {
namespace {

Event ev(int64_t op, int rank, int stream, double start, double end) {
  Event e;
  e.op = op;
  e.rank = rank;
  e.stream = stream;
  e.start_s = start;
  e.end_s = end;
  return e;
}

Timeline sample() {
  Timeline t;
  t.events = {ev(1, 0, 0, 0.5, 1.0), ev(2, 0, 1, 0.2, 0.4), ev(3, 1, 0, 0.1, 2.0), ev(4, 0, 0, 0.0, 0.5)};
  return t;
}

TEST(Timeline, SpanAndMakespan) {
  Timeline t = sample();
  EXPECT_DOUBLE_EQ(t.begin_s(), 0.0);
  EXPECT_DOUBLE_EQ(t.end_s(), 2.0);
  EXPECT_DOUBLE_EQ(t.makespan_s(), 2.0);
  t.events.erase(t.events.begin() + 3);
  EXPECT_DOUBLE_EQ(t.makespan_s(), 1.9);
  EXPECT_DOUBLE_EQ(Timeline{}.makespan_s(), 0.0);
}

TEST(Timeline, RankAndStreamViewsAreInStartOrder) {
  Timeline t = sample();
  EXPECT_EQ(t.ranks(), (std::vector<int>{0, 1}));
  EXPECT_EQ(t.streams(), (std::vector<StreamKey>{{0, 0}, {0, 1}, {1, 0}}));
  auto r0 = t.on_rank(0);
  ASSERT_EQ(r0.size(), 3u);
  EXPECT_EQ(r0[0]->op, 4);  // stream 0 first (canonical order), then by start
  EXPECT_EQ(r0[1]->op, 1);
  EXPECT_EQ(r0[2]->op, 2);
  auto s = t.on_stream(0, 0);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]->op, 4);
  EXPECT_EQ(s[1]->op, 1);
  EXPECT_TRUE(t.on_stream(5, 0).empty());
}

TEST(Timeline, DefaultNames) {
  Timeline t;
  t.rank_names[2] = "node0/gpu2";
  EXPECT_EQ(t.rank_name(2), "node0/gpu2");
  EXPECT_EQ(t.rank_name(1), "rank 1");
  EXPECT_EQ(t.stream_name(1, 3), "stream 3");
}

TEST(Timeline, SourceNames) {
  for (auto s : {Source::analytic, Source::simgrid, Source::runtime_cpu, Source::runtime_cuda, Source::kineto})
    EXPECT_EQ(parse_source(to_string(s)), s);
  EXPECT_EQ(to_string(Source::runtime_cuda), "runtime-cuda");
  EXPECT_FALSE(parse_source("ns3"));
}

TEST(Timeline, EdgeKindNames) {
  for (int k = 0; k < kEdgeKindCount; ++k) EXPECT_EQ(parse_edge_kind(to_string(EdgeKind(k))), EdgeKind(k));
  EXPECT_EQ(to_string(EdgeKind::dependency), "dependency");
  EXPECT_EQ(to_string(EdgeKind::sync), "sync");
  EXPECT_FALSE(parse_edge_kind("wait"));
}

TEST(Timeline, SortKeepsEdgesAndEqualityComparesThem) {
  Timeline a = sample();
  a.edges = {{2, 1, EdgeKind::stream}, {1, 2, EdgeKind::p2p}};
  Timeline b = a;
  std::reverse(b.events.begin(), b.events.end());
  b.sort();
  EXPECT_EQ(b.edges, a.edges);
  EXPECT_TRUE(approx_equal(a, b));
  std::swap(b.edges[0], b.edges[1]);
  EXPECT_FALSE(approx_equal(a, b));
  b.edges = a.edges;
  b.edges[1].kind = EdgeKind::collective;
  EXPECT_FALSE(approx_equal(a, b));
}

TEST(Timeline, ApproxEqualToleratesRoundingOnly) {
  Timeline a = sample(), b = sample();
  std::reverse(b.events.begin(), b.events.end());
  EXPECT_TRUE(approx_equal(a, b));
  b.events[0].end_s *= 1 + 1e-15;
  EXPECT_TRUE(approx_equal(a, b));
  b.events[0].end_s *= 1 + 1e-9;
  EXPECT_FALSE(approx_equal(a, b));
}

TEST(TimelineJoin, PairsOnOpAndRankByOccurrence) {
  Timeline predicted, measured;
  predicted.events = {ev(1, 0, 0, 0, 1), ev(1, 1, 0, 0, 1), ev(2, 0, 0, 1, 2), ev(2, 0, 0, 3, 4), ev(-1, 0, 0, 0, 1)};
  measured.events = {ev(2, 0, 0, 3.5, 5), ev(2, 0, 0, 1.5, 2.5), ev(1, 0, 0, 0, 1.1), ev(9, 0, 0, 0, 1)};
  auto j = join_on_op(predicted, measured);
  ASSERT_EQ(j.pairs.size(), 3u);
  EXPECT_EQ(j.pairs[0].op, 1);
  EXPECT_EQ(j.pairs[0].rank, 0);
  EXPECT_DOUBLE_EQ(j.pairs[0].right->end_s, 1.1);
  EXPECT_EQ(j.pairs[1].op, 2);
  EXPECT_DOUBLE_EQ(j.pairs[1].left->start_s, 1);  // first occurrence with first
  EXPECT_DOUBLE_EQ(j.pairs[1].right->start_s, 1.5);
  EXPECT_DOUBLE_EQ(j.pairs[2].left->start_s, 3);
  EXPECT_DOUBLE_EQ(j.pairs[2].right->start_s, 3.5);
  ASSERT_EQ(j.left_only.size(), 1u);  // op 1 on rank 1; the op-less event never joins
  EXPECT_EQ(j.left_only[0]->rank, 1);
  ASSERT_EQ(j.right_only.size(), 1u);
  EXPECT_EQ(j.right_only[0]->op, 9);
}

}  // namespace
}  // namespace rm::traces
