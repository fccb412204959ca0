// The analytic engine's queues (analytic_parts.hpp): IndexedTimeHeap, the indexed
// heap of flow ends (and of the lanes' heads), and Latencies, the first-in-first-out lanes of transfers
// in their route latency. Both must hand out entries in (t, seq) order exactly
// as one priority queue of everything would: the engine's ties, and so its
// answers, depend on it. Checked against std::priority_queue on random runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <stdexcept>
#include <random>
#include <tuple>
#include <vector>

#include "sim/engine/analytic_parts.hpp"

namespace rm::engine::analytic_parts {
namespace {

using Ref = std::tuple<double, uint64_t, int64_t>;  // (t, seq, what)

TEST(IndexedTimeHeap, PopsInKeyOrderWhileKeysChangeInPlace) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    IndexedTimeHeap heap;
    std::vector<IndexedTimeHeap::Key> live(64, IndexedTimeHeap::Key{-1, 0});  // t < 0: not queued
    uint64_t seq = 0;
    std::uniform_real_distribution<double> t(0, 10);
    for (int i = 0; i < 2000; ++i) {
      const auto f = int32_t(rng() % live.size());
      if (rng() % 3 != 0) {  // queue f or move its key
        live[size_t(f)] = {std::floor(t(rng)), seq++};  // whole times: many ties broken by seq
        heap.set(f, live[size_t(f)]);
      } else if (!heap.empty()) {
        int32_t best = -1;
        for (size_t g = 0; g < live.size(); ++g)
          if (live[g].t >= 0 && (best < 0 || live[g] < live[size_t(best)])) best = int32_t(g);
        ASSERT_EQ(heap.top(), best);
        ASSERT_EQ(heap.top_key().seq, live[size_t(best)].seq);
        ASSERT_EQ(heap.top_key().t, live[size_t(best)].t);
        live[size_t(best)].t = -1;
        heap.pop();
      }
    }
  }
}

// Transfers pushed at a clock that only moves forward, into lanes of a few
// latencies, popped whenever the next of them is due before the clock's next
// move: the order is a priority queue's over (t, seq).
TEST(Latencies, HandOutTransfersInTheOrderOfOneQueue) {
  std::mt19937_64 rng(11);
  const std::vector<double> latency = {1e-6, 2.5e-6, 1e-6 + 2.5e-6, 7e-6, 0.1};
  for (int trial = 0; trial < 40; ++trial) {
    Latencies lanes;
    std::vector<int32_t> lane_of;
    for (double l : latency) lane_of.push_back(lanes.lane_of(l));
    EXPECT_EQ(lanes.lane_of(latency[1]), lane_of[1]) << "one lane per latency value";
    std::priority_queue<Ref, std::vector<Ref>, std::greater<>> ref;
    double now = 0;
    uint64_t seq = 0;
    int64_t what = 0;
    for (int i = 0; i < 20000; ++i) {
      if (rng() % 4 != 0) {
        const size_t k = rng() % latency.size();
        const double t = now + latency[k];
        lanes.push(lane_of[k], {t, seq, {what, -1}, 1.0, int32_t(k)});
        ref.push({t, seq++, what++});
      } else if (!lanes.empty()) {
        const auto [t, s, w] = ref.top();
        ref.pop();
        ASSERT_EQ(lanes.top().seq, s);
        const Activation a = lanes.pop();
        ASSERT_EQ(a.t, t);
        ASSERT_EQ(a.owner.a, w);
        now = a.t;  // the clock moves to what was handled
      }
      if (rng() % 8 == 0) {  // and between, as other events pass, never beyond what is due
        double next = now + 1e-6 * double(rng() % 3);
        if (!lanes.empty()) next = std::min(next, lanes.top().t);
        now = std::max(now, next);
      }
    }
    while (!ref.empty()) {
      ASSERT_FALSE(lanes.empty());
      ASSERT_EQ(lanes.pop().seq, std::get<1>(ref.top()));
      ref.pop();
    }
    EXPECT_TRUE(lanes.empty());
  }
}

TEST(Latencies, ALaneThatNeverDrainsKeepsItsOrder) {
  // One lane always holding a backlog: its handed-out entries are compacted
  // away (past 4,096) without disturbing what is waiting.
  Latencies lanes;
  const int32_t l = lanes.lane_of(1.0);
  uint64_t seq = 0, next = 0;
  for (int i = 0; i < 5000; ++i) lanes.push(l, {double(i), seq++, {i, -1}, 0, 0});
  for (int i = 5000; i < 60000; ++i) {
    lanes.push(l, {double(i), seq++, {i, -1}, 0, 0});
    ASSERT_EQ(lanes.pop().seq, next++);
  }
  while (!lanes.empty()) ASSERT_EQ(lanes.pop().seq, next++);
  EXPECT_EQ(next, seq);
}

TEST(Latencies, AnEntryDueBeforeItsLanesLastIsRefused) {
  Latencies lanes;
  const int32_t l = lanes.lane_of(1.0);
  lanes.push(l, {5.0, 1, {0, -1}, 0, 0});
  EXPECT_THROW(lanes.push(l, {4.0, 2, {1, -1}, 0, 0}), std::logic_error);
}

}  // namespace
}  // namespace rm::engine::analytic_parts
