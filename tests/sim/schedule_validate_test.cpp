#include "sim/schedule/validate.hpp"

#include <gtest/gtest.h>

#include <random>

#include "sim/schedule/builder.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/deadlock.hpp"
#include "sim/schedule/topo_order.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "tests/support/op_descs.hpp"
#include "tests/support/schedule_random.hpp"

namespace rm::schedule {
namespace {

// Two ranks, each with a compute and a comm stream; group 0 = {0, 1}.
ScheduleBuilder two_ranks() {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) {
    b.add_rank(r);
    b.add_stream(r, StreamKind::compute);
    b.add_stream(r, StreamKind::comm_intra);
  }
  b.add_group({0, 1}, "pair");
  return b;
}

Op comm(int rank, OpKind kind, int peer) {
  Op op;
  op.rank = rank;
  op.stream = 1;
  op.kind = kind;
  op.peer = peer;
  return op;
}
// What a transfer of `bytes` costs (ScheduleBuilder::add_op's entry).
OpDesc moved(int64_t bytes = 1024) { return {0.0, 0, 0, bytes}; }

// The first problem, which must be of `kind` and about `op`; returns its message.
std::string first_problem(const Schedule& s, ProblemKind kind, OpId op) {
  auto problems = check(s);
  if (problems.empty()) return "no problem";
  EXPECT_EQ(static_cast<int>(problems[0].kind), static_cast<int>(kind)) << problems[0].message;
  EXPECT_EQ(problems[0].op, op) << problems[0].message;
  return problems[0].message;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ScheduleValidate, RandomSchedulesAreValid) {
  for (unsigned seed = 0; seed < 60; ++seed) EXPECT_TRUE(check(testing::random_schedule(seed)).empty()) << seed;
}

TEST(ScheduleValidate, DanglingDependency) {
  auto b = two_ranks();
  OpId a = b.compute(0, 0, OpKind::gemm, {}, {});
  Schedule s = b.peek();
  s.ops[static_cast<size_t>(a)].deps.push_back(42);
  auto msg = first_problem(s, ProblemKind::dangling_dep, a);
  EXPECT_TRUE(has(msg, "op 0 (rank 0 stream 'compute', gemm forward): depends on op 42, which does not exist")) << msg;
  EXPECT_THROW(validate(s), ScheduleError);
}

TEST(ScheduleValidate, DuplicateId) {
  auto b = two_ranks();
  b.compute(0, 0, OpKind::gemm, {}, {});
  b.compute(0, 0, OpKind::gemm, {}, {});
  Schedule s = b.peek();
  s.ops[1].id = 0;
  auto msg = first_problem(s, ProblemKind::bad_id, -1);
  EXPECT_TRUE(has(msg, "op 0: duplicate id (found at position 1")) << msg;
}

TEST(ScheduleValidate, UnknownRankStreamAndGroup) {
  auto b = two_ranks();
  b.compute(0, 0, OpKind::gemm, {}, {});
  Schedule s = b.peek();
  s.ops[0].rank = 5;
  EXPECT_TRUE(has(first_problem(s, ProblemKind::bad_rank, 0), "op 0 (rank 5 stream 0, gemm forward): unknown rank 5"));
  s.ops[0].rank = 1;
  s.ops[0].stream = 9;
  EXPECT_TRUE(has(first_problem(s, ProblemKind::bad_stream, 0), "unknown stream 9 on rank 1"));
  auto c = two_ranks();
  auto ids = c.collective(0, OpKind::all_reduce, 64, {}, StreamKind::comm_intra);
  Schedule t = c.peek();
  t.ops[static_cast<size_t>(ids[1])].group = 3;
  EXPECT_TRUE(has(first_problem(t, ProblemKind::bad_group, ids[1]), "op 1 (rank 1 stream 'comm_intra', all_reduce "
                                                                    "forward): unknown group 3"));
}

TEST(ScheduleValidate, SendWithoutRecv) {
  auto b = two_ranks();
  OpId send = b.add_op(comm(0, OpKind::send, 1), moved());
  auto msg = first_problem(b.peek(), ProblemKind::unmatched_p2p, send);
  EXPECT_TRUE(has(msg, "op 0 (rank 0 stream 'comm_intra', send forward): send to rank 1 (tag 0, 1024 bytes) has no "
                       "matching recv on rank 1"))
      << msg;
}

TEST(ScheduleValidate, RecvWithWrongTagOrBytes) {
  auto b = two_ranks();
  OpId send = b.add_op(comm(0, OpKind::send, 1), moved());
  Op recv = comm(1, OpKind::recv, 0);
  recv.tag = 3;  // tags must agree
  OpId r = b.add_op(recv, moved());
  auto problems = check(b.peek());
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].op, send);
  EXPECT_EQ(problems[1].op, r);
  EXPECT_TRUE(has(problems[1].message, "recv from rank 0 (tag 3, 1024 bytes) has no matching send on rank 0"));

  auto c = two_ranks();
  OpId s2 = c.add_op(comm(0, OpKind::send, 1), moved(1024));
  c.add_op(comm(1, OpKind::recv, 0), moved(2048));
  EXPECT_TRUE(has(first_problem(c.peek(), ProblemKind::unmatched_p2p, s2),
                  "sends 1024 bytes but its matching recv, op 1, expects 2048"));
}

TEST(ScheduleValidate, CollectiveMissingAMember) {
  ScheduleBuilder b;
  for (int r = 0; r < 3; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_inter);
  int g = b.add_group({0, 1, 2}, "world");
  auto ids = b.collective(g, OpKind::all_gather, 4096, {Phase::forward, 2, -1}, StreamKind::comm_inter);
  Schedule s = b.peek();
  s.ops.pop_back();  // rank 2 does not take part
  auto msg = first_problem(s, ProblemKind::bad_collective, ids[0]);
  EXPECT_TRUE(has(msg, "op 0 (rank 0 stream 'comm_inter', all_gather forward layer 2): all_gather on group 0 (tag 0): "
                       "member rank 2 has no matching op"))
      << msg;
  s = b.peek();
  rm::testing::edit_desc(s, s.ops[2]).bytes = 1;
  EXPECT_TRUE(has(first_problem(s, ProblemKind::bad_collective, 2), "differ in kind, bytes or root"));
}

TEST(ScheduleValidate, CollectiveOnANonMember) {
  ScheduleBuilder b;
  for (int r = 0; r < 3; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra);
  b.add_group({0, 1});
  b.collective(0, OpKind::all_reduce, 64, {}, StreamKind::comm_intra);
  Schedule s = b.peek();
  s.ops[1].rank = 2;
  EXPECT_TRUE(has(first_problem(s, ProblemKind::bad_group, 1), "rank 2 is not a member of group 0"));
}

TEST(ScheduleValidate, CrossRankDependency) {
  auto b = two_ranks();
  OpId a = b.compute(0, 0, OpKind::gemm, {}, {});
  OpId c = b.compute(1, 0, OpKind::gemm, {}, {}, {a});
  EXPECT_TRUE(has(first_problem(b.peek(), ProblemKind::cross_rank_dep, c), "depends on op 0 (rank 0"));
}

TEST(ScheduleValidate, DependencyCycle) {
  auto b = two_ranks();
  OpId a = b.compute(0, 0, OpKind::gemm, {}, {});
  OpId c = b.compute(0, 0, OpKind::elementwise, {}, {});
  OpId d = b.compute(0, 0, OpKind::elementwise, {}, {}, {c});
  b.add_dep(a, d);  // a needs d, d needs c, c follows a on the stream
  auto msg = first_problem(b.peek(), ProblemKind::cycle, a);
  EXPECT_TRUE(has(msg, "op 0 (rank 0 stream 'compute', gemm forward): is on a dependency cycle (0 -> 2 -> 1 -> 0"))
      << msg;
  EXPECT_THROW(std::move(b).build(), ScheduleError);
}

// check() runs the zero-time run first and searches for a cycle only when it
// leaves ops unrun; the order it reports in must stay the plain one: a cycle
// if there is one, else the deadlocks. Random same-rank dependencies (some
// backwards, closing cycles or stalling streams) against that oracle.
TEST(ScheduleValidate, CycleBeforeDeadlockOnRandomDependencies) {
  int cycles = 0, deadlocks = 0;
  for (unsigned seed = 0; seed < 400; ++seed) {
    Schedule s = testing::random_schedule(seed);
    std::mt19937 rng(seed);
    const auto n = static_cast<unsigned>(s.ops.size());
    for (int k = 0, extra = int(rng() % 4); k < extra; ++k) {
      Op& op = s.ops[rng() % n];
      std::vector<OpId> same;
      for (const Op& o : s.ops)
        if (o.rank == op.rank && o.id != op.id) same.push_back(o.id);
      if (!same.empty()) op.deps.push_back(same[rng() % same.size()]);
    }
    std::vector<Problem> expect;
    if (auto cycle = find_cycle(s)) {
      expect.push_back({ProblemKind::cycle, cycle->front(), ""});
      ++cycles;
    } else {
      expect = find_deadlocks(s, match_comms(s));
      deadlocks += !expect.empty();
    }
    const auto got = check(s);
    ASSERT_EQ(got.size(), expect.size()) << seed;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].kind, expect[i].kind) << seed;
      EXPECT_EQ(got[i].op, expect[i].op) << seed;
      if (expect[i].kind == ProblemKind::deadlock) {
        EXPECT_EQ(got[i].message, expect[i].message) << seed;
      }
    }
  }
  EXPECT_GT(cycles, 10);  // the cases exercise both branches
  EXPECT_GT(deadlocks, 0) << cycles;
}

TEST(ScheduleValidate, DeadlockOnCrossedReceives) {
  // Both ranks first wait to receive, then send: matched, acyclic, and stuck.
  auto b = two_ranks();
  OpId r0 = b.add_op(comm(0, OpKind::recv, 1), moved());
  OpId r1 = b.add_op(comm(1, OpKind::recv, 0), moved());
  b.add_op(comm(0, OpKind::send, 1), moved());
  b.add_op(comm(1, OpKind::send, 0), moved());
  auto problems = check(b.peek());
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].kind, ProblemKind::deadlock);
  EXPECT_EQ(problems[0].op, r0);
  EXPECT_EQ(problems[1].op, r1);
  EXPECT_TRUE(has(problems[0].message, "op 0 (rank 0 stream 'comm_intra', recv forward): deadlock (4 ops never run): "
                                       "waits for its partner op 3 (rank 1"))
      << problems[0].message;
  try {
    validate(b.peek(), "ring.json");
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_TRUE(has(e.what(), "ring.json: op 0 (")) << e.what();
    EXPECT_TRUE(has(e.what(), "(and 1 more problems)")) << e.what();
  }
}

TEST(ScheduleValidate, LaunchingTogetherResolvesTheCrossedReceives) {
  auto b = two_ranks();
  OpId r0 = b.add_op(comm(0, OpKind::recv, 1), moved());
  OpId r1 = b.add_op(comm(1, OpKind::recv, 0), moved());
  OpId s0 = b.add_op(comm(0, OpKind::send, 1), moved());
  OpId s1 = b.add_op(comm(1, OpKind::send, 0), moved());
  b.launch_together(std::vector<OpId>{r0, s0});
  b.launch_together(std::vector<OpId>{s1, r1});
  EXPECT_TRUE(check(b.peek()).empty());
}

TEST(ScheduleValidate, DeadlockThroughADependency) {
  // rank 1's recv waits for a compute that follows a collective rank 0 joins only after its send.
  auto b = two_ranks();
  auto coll = b.collective(0, OpKind::all_reduce, 64, {}, StreamKind::compute);
  auto x = b.p2p({0, 1, 1, 1, 128, {}});
  b.add_dep(coll[0], x.send);
  b.add_dep(x.recv, coll[1]);
  auto problems = check(b.peek());
  ASSERT_EQ(problems.size(), 4u);  // no dependency cycle: it closes only through the matching
  EXPECT_EQ(problems[0].kind, ProblemKind::deadlock);
  EXPECT_EQ(problems[0].op, coll[0]);
  EXPECT_TRUE(has(problems[0].message, "waits for its dependency op 2 (rank 0 stream 'comm_intra', send"))
      << problems[0].message;
}

TEST(ScheduleValidate, BadJoin) {
  auto b = two_ranks();
  b.compute(0, 1, OpKind::gemm, {}, {});
  Op send = comm(0, OpKind::send, 1);
  send.joined = true;
  OpId s = b.add_op(send, moved());
  b.add_op(comm(1, OpKind::recv, 0), moved());
  EXPECT_TRUE(has(first_problem(b.peek(), ProblemKind::bad_join, s), "is joined"));
}

// An executable pair: rank 0 computes attention on Q, K|V and sends K|V to rank 1.
struct Executable {
  Schedule s;
  OpId attn = -1, send = -1, recv = -1;
};
Executable executable_pair() {
  ScheduleBuilder b({{"workload", {{"seq_len", "1k"}}}, {"model", {{"heads", 4}, {"kv_heads", 2}}}});
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const int q = b.add_buffer(0, "q", BufferRole::q, DType::bf16, {1, 512, 2, 64});
  const int kv = b.add_buffer(0, "kv", BufferRole::kv, DType::bf16, {2, 1, 512, 1, 64});
  const int o = b.add_buffer(0, "o", BufferRole::o, DType::bf16, {1, 512, 2, 64});
  const int slot = b.add_buffer(1, "kv.inner0", BufferRole::kv_slot, DType::bf16, {2, 1, 512, 1, 64});
  Executable x;
  x.attn = b.compute(0, 0, OpKind::attn_fwd, {Phase::forward, 0, 0}, {1e9, 4, 512});
  b.set_access(x.attn, {q, kv}, {o});
  const int tokens = b.token_set({{{0, 512, 0, 1}}});
  b.set_attention(x.attn, {tokens, tokens, 0, 2, 0, 1, Mask::causal, IndexSource::none, false});
  auto ids = b.p2p({0, 1, 1, 1, 2 * 512 * 64 * 2, {Phase::forward, 0, 0}});
  b.set_access(ids.send, {kv}, {});
  b.set_access(ids.recv, {}, {slot});
  x.send = ids.send;
  x.recv = ids.recv;
  x.s = std::move(b).build();
  return x;
}

TEST(ScheduleValidate, ExecutableScheduleIsValid) { EXPECT_TRUE(check(executable_pair().s).empty()); }

TEST(ScheduleValidate, TransferBytesMustEqualItsBuffers) {
  auto x = executable_pair();
  rm::testing::edit_desc(x.s, x.s.ops[size_t(x.send)]).bytes = 1000;
  rm::testing::edit_desc(x.s, x.s.ops[size_t(x.recv)]).bytes = 1000;
  auto msg = first_problem(x.s, ProblemKind::bad_data, x.send);
  EXPECT_TRUE(has(msg, "moves 1000 bytes, but the buffers it reads hold 131072")) << msg;
}

TEST(ScheduleValidate, BufferOnAnotherRank) {
  auto x = executable_pair();
  x.s.accesses.push_back({{}, {0}});  // rank 0's q, written by rank 1's recv
  rm::testing::edit_desc(x.s, x.s.ops[size_t(x.recv)]).access = int32_t(x.s.accesses.size() - 1);
  auto msg = first_problem(x.s, ProblemKind::bad_data, x.recv);
  EXPECT_TRUE(has(msg, "uses buffer 0 'q' of rank 0")) << msg;
}

TEST(ScheduleValidate, ExecutableScheduleNamesWhatEveryTransferMoves) {
  auto x = executable_pair();
  rm::testing::edit_desc(x.s, x.s.ops[size_t(x.recv)]).access = -1;
  EXPECT_TRUE(has(first_problem(x.s, ProblemKind::bad_data, x.recv), "names no buffers it moves"));
  x = executable_pair();
  rm::testing::edit_desc(x.s, x.s.ops[size_t(x.attn)]).detail = -1;
  EXPECT_TRUE(has(first_problem(x.s, ProblemKind::bad_data, x.attn), "has no attention descriptor"));
}

TEST(ScheduleValidate, DescriptorsWithinTheExperiment) {
  auto x = executable_pair();
  x.s.token_sets[0].runs[0].begin = 600;  // 600 + 512 > 1k tokens
  auto problems = check(x.s);
  ASSERT_FALSE(problems.empty());
  EXPECT_TRUE(has(problems[0].message, "token set 0: reaches token 1111, beyond seq_len 1024")) << problems[0].message;
  x = executable_pair();
  x.s.attentions[0].head_begin = 3;  // heads [3, 5) of 4
  problems = check(x.s);
  ASSERT_FALSE(problems.empty());
  EXPECT_TRUE(has(problems[0].message, "query heads [3, 5) lie outside the model's 4 heads")) << problems[0].message;
  x = executable_pair();
  rm::testing::edit_desc(x.s, x.s.ops[size_t(x.attn)]).detail = 7;
  EXPECT_TRUE(has(first_problem(x.s, ProblemKind::bad_data, x.attn), "detail 7 is not in the table of 1"));
}

TEST(ScheduleValidate, CostableOnlySchedulesNeedNoDescriptors) {
  Schedule s = testing::random_schedule(3);
  ASSERT_TRUE(s.buffers.empty());
  EXPECT_TRUE(check(s).empty());
  rm::testing::edit_desc(s, s.ops[0]).access = 0;  // but an index must still point into its table
  EXPECT_FALSE(check(s).empty());
}

}  // namespace
}  // namespace rm::schedule
