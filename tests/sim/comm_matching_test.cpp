// Communication matching against a brute-force reading of its rule (the k-th
// send from A to B with tag t meets the k-th such recv; the k-th op of each
// member on (group, tag) forms the k-th call), on random schedules whose tags
// are scrambled so keys collide and ops go unmatched.
#include "sim/schedule/comm_matching.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/support/synthetic_schedules.hpp"

namespace rm::schedule {
namespace {

// Ops before `op` (by id) with the same key, as key(op) says.
template <class Same>
int64_t occurrence(const Schedule& s, const Op& op, Same same) {
  return std::count_if(s.ops.begin(), s.ops.begin() + op.id, [&](const Op& o) { return same(o); });
}

TEST(CommMatching, AgreesWithBruteForceOnScrambledTags) {
  std::mt19937_64 rng(3);
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    Schedule s = engine::random_schedule({seed, int(2 + seed % 5), 120});
    for (Op& op : s.ops) op.tag = int64_t(rng() % 3);
    const CommMatching m = match_comms(s);
    for (const Op& op : s.ops) {
      SCOPED_TRACE(describe(s, op.id));
      if (is_p2p(op.kind)) {
        const bool send = op.kind == OpKind::send;
        const int from = send ? op.rank : op.peer, to = send ? op.peer : op.rank;
        auto is = [&](const Op& o, OpKind k) {
          const bool ends = k == OpKind::send ? o.rank == from && o.peer == to : o.rank == to && o.peer == from;
          return o.kind == k && o.tag == op.tag && ends;
        };
        const int64_t k = occurrence(s, op, [&](const Op& o) { return is(o, op.kind); });
        const OpKind other = send ? OpKind::recv : OpKind::send;
        OpId expect = -1;
        for (int64_t seen = 0; const Op& o : s.ops)
          if (is(o, other) && seen++ == k) expect = o.id;
        EXPECT_EQ(m.partner[size_t(op.id)], expect);
        EXPECT_EQ(m.call_of[size_t(op.id)], -1);
      } else if (is_collective(op.kind)) {
        const auto& members = s.groups[size_t(op.group)].ranks;
        const auto pos = size_t(std::find(members.begin(), members.end(), op.rank) - members.begin());
        auto same = [&](const Op& o, int rank) {
          return is_collective(o.kind) && o.group == op.group && o.tag == op.tag && o.rank == rank;
        };
        const int64_t k = occurrence(s, op, [&](const Op& o) { return same(o, op.rank); });
        ASSERT_GE(m.call_of[size_t(op.id)], 0);
        const auto& call = m.calls[size_t(m.call_of[size_t(op.id)])];
        ASSERT_EQ(call.size(), members.size());
        EXPECT_EQ(call[pos], op.id);
        for (size_t p = 0; p < members.size(); ++p)
          if (call[p] >= 0) {
            EXPECT_EQ(occurrence(s, s.ops[size_t(call[p])], [&](const Op& o) { return same(o, members[p]); }), k);
          }
        EXPECT_EQ(m.partner[size_t(op.id)], -1);
      } else {
        EXPECT_EQ(m.partner[size_t(op.id)], -1);
        EXPECT_EQ(m.call_of[size_t(op.id)], -1);
      }
    }
    // Calls are numbered by (group, tag), then occurrence.
    for (size_t c = 1; c < m.calls.size(); ++c) {
      auto key = [&](size_t i) {
        const auto& call = m.calls[i];
        const Op& o = s.ops[size_t(*std::find_if(call.begin(), call.end(), [](OpId x) { return x >= 0; }))];
        return std::pair{o.group, o.tag};
      };
      EXPECT_LE(key(c - 1), key(c));
    }
  }
}

}  // namespace
}  // namespace rm::schedule
