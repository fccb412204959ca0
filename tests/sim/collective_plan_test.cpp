// The one collective plan (sim/cost/collective_plan.hpp): each row's plan
// against oracles — its dependency DAG, the bytes every member must receive,
// the closed form as the DAG's longest path, the pairs as the plan's distinct
// pairs, and the spanning (replica) plan as the full plan's replica-0 part.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "sim/cost/collective_plan.hpp"

namespace rm::cost {
namespace {

using schedule::OpKind;

constexpr OpKind kKinds[] = {OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_reduce, OpKind::all_to_all,
                             OpKind::broadcast};

// Contention-free makespan of a plan: each transfer takes lat + bytes / rate
// and starts when its dependencies have ended (an fp64 list schedule).
double makespan(const std::vector<PlannedTransfer>& plan, double lat, double rate) {
  std::vector<double> end(plan.size(), 0.0);
  double last = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    double start = 0;
    for (int32_t d : plan[i].deps)
      if (d >= 0) start = std::max(start, end[size_t(d)]);
    end[i] = start + lat + plan[i].bytes / rate;
    last = std::max(last, end[i]);
  }
  return last;
}

TEST(CollectivePlan, DependenciesPointToEarlierTransfersOfTheSamePlan) {
  for (OpKind kind : kKinds)
    for (int n = 1; n <= 9; ++n)
      for (int root = 0; root < (kind == OpKind::broadcast ? n : 1); ++root) {
        const auto plan = plan_collective(kind, n, 3e6, root);
        for (size_t i = 0; i < plan.size(); ++i) {
          EXPECT_NE(plan[i].src, plan[i].dst);
          EXPECT_TRUE(plan[i].src >= 0 && plan[i].src < n && plan[i].dst >= 0 && plan[i].dst < n);
          for (int32_t d : plan[i].deps) EXPECT_TRUE(d >= -1 && d < int32_t(i)) << to_string(kind) << " n=" << n;
        }
      }
}

// What nccl-tests' bus bandwidth counts: the bytes each member receives.
TEST(CollectivePlan, EveryMemberReceivesWhatTheCollectiveMustMove) {
  for (OpKind kind : kKinds)
    for (int n = 2; n <= 9; ++n)
      for (double bytes : {1000.0, 3e6, 7.5e7}) {
        const int root = kind == OpKind::broadcast ? n / 2 : 0;
        std::map<int, double> received;
        for (const auto& x : plan_collective(kind, n, bytes, root)) received[x.dst] += x.bytes;
        for (int m = 0; m < n; ++m) {
          double want = 0;
          switch (kind) {
            case OpKind::all_gather:
            case OpKind::reduce_scatter:
            case OpKind::all_to_all: want = bytes * (n - 1) / n; break;
            case OpKind::all_reduce: want = 2 * bytes * (n - 1) / n; break;
            case OpKind::broadcast: want = m == root ? 0 : bytes; break;
            default: FAIL();
          }
          EXPECT_NEAR(received[m], want, want * 1e-12) << to_string(kind) << " n=" << n << " member " << m;
        }
      }
}

// The closed form is the plan's longest dependency chain: a list schedule of
// the plan, every hop alike, ends when collective_seconds says.
TEST(CollectivePlan, ClosedFormIsThePlansContentionFreeMakespan) {
  for (OpKind kind : kKinds)
    for (int n = 1; n <= 9; ++n)
      for (double bytes : {1000.0, 3e6, 4 * kBroadcastChunkBytes + 1, 1e9}) {
        const auto plan = plan_collective(kind, n, bytes, kind == OpKind::broadcast ? n - 1 : 0);
        const double lat = 3e-6, rate = 80e9;
        const double t = collective_seconds(kind, n, bytes, lat, rate);
        EXPECT_NEAR(t, makespan(plan, lat, rate), t * 1e-12) << to_string(kind) << " n=" << n << " bytes=" << bytes;
      }
}

// docs/cost-model.md's table, written out: the closed form must equal it bit for
// bit (calibration and the goldens were made with these expressions).
TEST(CollectivePlan, ClosedFormIsTheDocumentedFormulaBitForBit) {
  const double a = 2.5e-6, B = 123e9;
  for (int n = 2; n <= 64; ++n)
    for (double bytes : {1.0, 4096.0, 3e6, 1.7e9}) {
      const double dn = n;
      const int c = std::clamp(static_cast<int>(std::ceil(bytes / kBroadcastChunkBytes)), 1, kMaxBroadcastChunks);
      EXPECT_EQ(collective_seconds(OpKind::all_gather, n, bytes, a, B), (dn - 1) * (a + bytes / dn / B));
      EXPECT_EQ(collective_seconds(OpKind::reduce_scatter, n, bytes, a, B), (dn - 1) * (a + bytes / dn / B));
      EXPECT_EQ(collective_seconds(OpKind::all_to_all, n, bytes, a, B), (dn - 1) * (a + bytes / dn / B));
      EXPECT_EQ(collective_seconds(OpKind::all_reduce, n, bytes, a, B), 2 * (dn - 1) * (a + bytes / dn / B));
      EXPECT_EQ(collective_seconds(OpKind::broadcast, n, bytes, a, B), (c + dn - 2) * (a + bytes / c / B));
    }
  EXPECT_EQ(collective_seconds(OpKind::all_reduce, 1, 1e9, a, B), 0.0);
}

TEST(CollectivePlan, PairsAreThePlansDistinctPairsInOrderOfFirstUse) {
  for (OpKind kind : kKinds)
    for (int n = 1; n <= 7; ++n)
      for (int replicas : {0, 2, 3}) {
        if (replicas > 1 && kind == OpKind::broadcast) continue;
        const int root = kind == OpKind::broadcast ? n / 2 : 0;
        const auto plan = replicas > 1 ? plan_collective(schedule::CallShapeKey{kind, n, replicas, 5000, 0})
                                       : plan_collective(kind, n, 5000, root);
        std::vector<std::pair<int, int>> want;
        std::set<std::pair<int, int>> seen;
        for (const auto& x : plan)
          if (seen.insert({x.src, x.dst}).second) want.emplace_back(x.src, x.dst);
        EXPECT_EQ(collective_pairs(kind, n, root, replicas), want) << to_string(kind) << " n=" << n;
      }
}

TEST(CollectivePlan, EveryCollectiveKindHasARowAndNothingElseDoes) {
  for (OpKind kind : kKinds) EXPECT_EQ(collective_row(kind).kind, kind);
  EXPECT_THROW(collective_row(OpKind::gemm), std::invalid_argument);
  EXPECT_THROW(collective_row(OpKind::send), std::invalid_argument);
  EXPECT_THROW(plan_collective(OpKind::all_reduce, 0, 1.0), std::invalid_argument);
  // A chain from a root cannot be folded onto replica 0: refused, not mis-planned.
  EXPECT_THROW(plan_collective(schedule::CallShapeKey{OpKind::broadcast, 2, 2, 1, 0}), std::invalid_argument);
  EXPECT_FALSE(collective_row(OpKind::broadcast).every_member_sends);
}

}  // namespace
}  // namespace rm::cost
