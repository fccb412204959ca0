// The run driver: what it tells a backend, in which order, on small
// hand-built schedules; its invariants on random schedules under random
// completion orders; and its zero-time run against a brute-force fixpoint of
// the run semantics on schedules broken at random (deadlocks included).
#include "sim/schedule/run_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <queue>
#include <random>
#include <string>

#include "tests/support/synthetic_schedules.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::schedule {
namespace {

// Logs every hook; the test completes ops by hand.
struct Recorder final : RunBackend {
  std::vector<std::string> log;
  void post(OpId op) override { log.push_back("post " + std::to_string(op)); }
  void start_compute(OpId op) override { log.push_back("compute " + std::to_string(op)); }
  void start_p2p(OpId op, OpId partner) override {
    log.push_back("p2p " + std::to_string(op) + " " + std::to_string(partner));
  }
  void start_collective(int64_t call) override { log.push_back("collective " + std::to_string(call)); }
  std::vector<std::string> take() { return std::exchange(log, {}); }
};

using Log = std::vector<std::string>;

TEST(RunDriver, LaunchesRunsInStreamOrderWithJoinedOpsTogether) {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const OpId work = b.compute(0, 0, OpKind::gemm, {}, {1, 0, 0});                // 0
  const auto there = b.p2p({0, 1, 1, 1, 8, {}, 0});                              // 1 send, 2 recv
  const auto back = b.p2p({1, 1, 0, 1, 8, {}, 1});                               // 3 send, 4 recv
  const OpId after = b.compute(0, 0, OpKind::gemm, {}, {1, 0, 0}, {back.recv});  // 5
  const std::array<OpId, 2> on0{there.send, back.recv}, on1{there.recv, back.send};
  b.launch_together(on0);
  b.launch_together(on1);
  b.add_dep(there.send, work);
  const Schedule s = std::move(b).build();
  const RunPlan plan(s);
  ASSERT_EQ(plan.streams.size(), 3u);  // numbered by first op: r0 compute, r0 comm, r1 comm
  EXPECT_EQ(plan.run_length[1], 2);
  EXPECT_EQ(plan.run_length[4], 0);

  Recorder rec;
  RunDriver d(plan, rec);
  d.start();
  // r0's comm run waits for op 0 (a dependency of its head); r1's run posts both
  // sides, whose partners are not posted yet.
  EXPECT_EQ(rec.take(), (Log{"post 0", "compute 0", "post 2", "post 3"}));
  d.complete(work);
  // Both of r0's ops post together; each finds its partner posted.
  EXPECT_EQ(rec.take(), (Log{"post 1", "post 4", "p2p 1 2", "p2p 4 3"}));
  d.complete(there.send);
  d.complete(there.recv);
  d.complete(back.send);
  EXPECT_TRUE(rec.take().empty());  // op 5 waits for op 4
  d.complete(back.recv);
  EXPECT_EQ(rec.take(), (Log{"post 5", "compute 5"}));
  EXPECT_EQ(d.ops_done(), 5);
  EXPECT_THROW(d.check_finished(s), ScheduleError);
  d.complete(after);
  EXPECT_NO_THROW(d.check_finished(s));
  EXPECT_THROW(d.complete(after), std::logic_error);  // twice
}

TEST(RunDriver, CollectiveStartsWhenItsLastMemberIsPosted) {
  ScheduleBuilder b;
  for (int r = 0; r < 3; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const OpId late = b.compute(1, 0, OpKind::gemm, {}, {1, 0, 0});
  const int g = b.add_group({0, 1, 2});
  const auto ids = b.collective(g, OpKind::all_reduce, 64, {}, StreamKind::comm_intra);
  b.add_dep(ids[1], late);
  const Schedule s = std::move(b).build();
  const RunPlan plan(s);
  Recorder rec;
  RunDriver d(plan, rec);
  d.start();
  EXPECT_EQ(rec.take(), (Log{"post 0", "compute 0", "post 1", "post 3"}));
  d.complete(late);
  EXPECT_EQ(rec.take(), (Log{"post 2", "collective 0"}));
  EXPECT_EQ(plan.match.calls[0], (std::vector<OpId>{1, 2, 3}));
}

TEST(RunDriver, StopsShortOnADeadlockAndNamesTheFirstStuckOp) {
  // Each rank receives before it sends: neither send is ever posted.
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::comm_intra);
  auto add = [&](int rank, OpKind kind) {
    Op op;
    op.rank = rank;
    op.kind = kind;
    op.peer = 1 - rank;
    b.add_op(op, {0.0, 0, 0, 8});
  };
  add(0, OpKind::recv);
  add(1, OpKind::recv);
  add(0, OpKind::send);
  add(1, OpKind::send);
  const Schedule& s = b.peek();
  const RunPlan plan(s);
  Recorder rec;
  RunDriver d(plan, rec);
  d.start();
  EXPECT_EQ(rec.take(), (Log{"post 0", "post 1"}));
  EXPECT_EQ(d.ops_done(), 0);
  EXPECT_THROW(d.complete(2), std::logic_error);  // never posted
  try {
    d.check_finished(s);
    ADD_FAILURE() << "a deadlocked run passed";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("op 0 (rank 0 stream 'comm_intra', recv forward): never runs", 0), 0u)
        << e.what();
  }
}

// Ends every op inside the hook that starts it, and logs completions.
struct ZeroTime final : RunBackend {
  RunDriver* d = nullptr;
  const RunPlan* p = nullptr;
  std::vector<OpId> completed;
  void end(OpId op) {
    completed.push_back(op);
    d->complete(op);
  }
  void post(OpId) override {}
  void start_compute(OpId op) override { end(op); }
  void start_p2p(OpId op, OpId partner) override { end(op), end(partner); }
  void start_collective(int64_t c) override {
    for (OpId m : p->match.calls[size_t(c)]) end(m);
  }
};

// A Schedule run to the end (or to where it sticks) with every op ending as it starts.
struct ZeroTimeRun {
  explicit ZeroTimeRun(const Schedule& s) : plan(s), d(plan, z) {
    z.d = &d;
    z.p = &plan;
    d.start();
  }
  RunPlan plan;
  ZeroTime z;
  RunDriver d;
};

TEST(RunDriver, CompletionsFromOneHookAreHandledInFullOneAfterAnother) {
  // The all-reduce's members end inside the hook that starts the call, member
  // 0 first. As nested calls would, member 0's consequences (c0, then d0
  // after it) come before member 1's (c1): the SimGrid engine's order.
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const int g = b.add_group({0, 1});
  const auto call = b.collective(g, OpKind::all_reduce, 64, {}, StreamKind::comm_intra);  // 0, 1
  const OpId c0 = b.compute(0, 0, OpKind::gemm, {}, {1, 0, 0}, {call[0]});
  const OpId c1 = b.compute(1, 0, OpKind::gemm, {}, {1, 0, 0}, {call[1]});
  const OpId d0 = b.compute(0, 0, OpKind::gemm, {}, {1, 0, 0});
  const Schedule s = std::move(b).build();
  const RunPlan plan(s);
  struct Logged final : RunBackend {
    RunDriver* d = nullptr;
    const RunPlan* p = nullptr;
    std::vector<OpId> started;
    void post(OpId) override {}
    void start_compute(OpId op) override { started.push_back(op), d->complete(op); }
    void start_p2p(OpId, OpId) override {}
    void start_collective(int64_t c) override {
      for (OpId m : p->match.calls[size_t(c)]) d->complete(m);
    }
  } z;
  RunDriver d(plan, z);
  z.d = &d;
  z.p = &plan;
  d.start();
  EXPECT_EQ(z.started, (std::vector<OpId>{c0, d0, c1}));
  EXPECT_EQ(d.ops_done(), 5);
}

TEST(RunDriver, ZeroTimeCompletionsFromInsideHooksRunALongChain) {
  // 100K ops that each release the next, on two streams of one rank: nested
  // calls would need a frame per op; the driver's own stack does not.
  Schedule s;
  s.ranks.push_back({0, 0, {{0, StreamKind::compute, "a"}, {1, StreamKind::compute, "b"}}});
  constexpr int n = 100'000;
  for (int i = 0; i < n; ++i) {
    Op op;
    op.id = i;
    op.stream = i % 2;
    if (i > 0) op.deps = {i - 1};
    s.ops.push_back(op);
  }
  const ZeroTimeRun run(s);
  ASSERT_EQ(run.d.ops_done(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(run.z.completed[size_t(i)], i);
}

// Completes started ops after random delays (ties in random order) and checks
// each hook against the run semantics as it comes.
class Checked final : public RunBackend {
 public:
  Checked(const Schedule& s, const RunPlan& p, uint64_t seed) : s_(s), p_(p), rng_(seed), d_(p, *this) {
    posted_.assign(s.ops.size(), 0);
    done_.assign(s.ops.size(), 0);
    started_.assign(s.ops.size(), 0);
  }

  void run() {
    d_.start();
    while (!queue_.empty()) {
      const auto [t, tie, op] = queue_.top();
      queue_.pop();
      now_ = t;
      done_[size_t(op)] = 1;
      d_.complete(op);
    }
    for (const Op& op : s_.ops) {
      EXPECT_TRUE(done_[size_t(op.id)]) << describe(s_, op.id);
      EXPECT_TRUE(d_.done(op.id));
    }
    EXPECT_EQ(d_.ops_done(), int64_t(s_.ops.size()));
  }

 private:
  void later(OpId op) { queue_.push({now_ + double(rng_() % 4), rng_(), op}); }

  void post(OpId op) override {
    const Op& o = s_.ops[size_t(op)];
    EXPECT_FALSE(posted_[size_t(op)]) << "posted twice: " << describe(s_, op);
    posted_[size_t(op)] = 1;
    for (OpId dep : o.deps) EXPECT_TRUE(done_[size_t(dep)]) << describe(s_, op);
    // Every earlier op of its stream has ended, unless it is in op's run.
    const auto& ops = p_.streams[size_t(p_.stream_of[size_t(op)])];
    bool in_run = o.joined;
    for (auto it = std::find(ops.begin(), ops.end(), op); it != ops.begin();) {
      --it;
      if (in_run) EXPECT_TRUE(posted_[size_t(*it)]) << "joined op posted alone: " << describe(s_, op);
      else EXPECT_TRUE(done_[size_t(*it)]) << describe(s_, op);
      in_run = in_run && s_.ops[size_t(*it)].joined;
    }
  }
  void start_compute(OpId op) override {
    EXPECT_TRUE(posted_[size_t(op)]);
    later(op);
  }
  void start_p2p(OpId op, OpId partner) override {
    EXPECT_EQ(p_.match.partner[size_t(op)], partner);
    EXPECT_TRUE(posted_[size_t(op)] && posted_[size_t(partner)]) << describe(s_, op);
    EXPECT_FALSE(started_[size_t(op)] || started_[size_t(partner)]) << "transfer started twice: " << describe(s_, op);
    started_[size_t(op)] = started_[size_t(partner)] = 1;
    const double t = now_ + double(rng_() % 4);
    queue_.push({t, rng_(), op});
    queue_.push({t, rng_(), partner});
  }
  void start_collective(int64_t c) override {
    for (OpId m : p_.match.calls[size_t(c)]) {
      EXPECT_TRUE(posted_[size_t(m)]) << describe(s_, m);
      EXPECT_FALSE(started_[size_t(m)]) << "call started twice: " << describe(s_, m);
      started_[size_t(m)] = 1;
      // Some members end at once, inside the hook, as the SimGrid engine's do.
      if (rng_() % 3 == 0) done_[size_t(m)] = 1, d_.complete(m);
      else later(m);
    }
  }

  const Schedule& s_;
  const RunPlan& p_;
  std::mt19937_64 rng_;
  RunDriver d_;
  std::vector<char> posted_, done_, started_;
  using Item = std::tuple<double, uint64_t, OpId>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue_;
  double now_ = 0;
};

TEST(RunDriver, HoldsTheRunSemanticsOnRandomSchedulesInAnyCompletionOrder) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const Schedule s = engine::random_schedule({seed, int(2 + seed % 6), 150});
    const RunPlan plan(s);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Checked(s, plan, seed).run();
  }
}

// The run semantics by brute force: repeat until nothing changes — launch a
// stream's next run when its deps and previous run have ended; end a posted
// compute op, a p2p pair with both sides posted, a call with all members posted.
std::vector<char> fixpoint(const Schedule& s) {
  const auto m = match_comms(s);
  std::map<std::pair<int, int>, std::vector<OpId>> streams;
  for (const Op& op : s.ops) streams[{op.rank, op.stream}].push_back(op.id);
  std::vector<char> posted(s.ops.size(), 0), done(s.ops.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [key, ops] : streams) {
      size_t head = 0;
      while (head < ops.size() && done[size_t(ops[head])]) ++head;
      if (head == ops.size() || posted[size_t(ops[head])]) continue;
      size_t end = head + 1;
      while (end < ops.size() && s.ops[size_t(ops[end])].joined) ++end;
      bool ready = true;
      for (size_t i = head; i < end; ++i)
        for (OpId d : s.ops[size_t(ops[i])].deps) ready = ready && done[size_t(d)];
      for (size_t i = 0; i < head; ++i) ready = ready && done[size_t(ops[i])];
      if (!ready) continue;
      for (size_t i = head; i < end; ++i) posted[size_t(ops[i])] = 1;
      changed = true;
    }
    for (const Op& op : s.ops) {
      const auto i = size_t(op.id);
      if (!posted[i] || done[i]) continue;
      bool ends = is_compute(op.kind);
      if (is_p2p(op.kind)) ends = m.partner[i] >= 0 && posted[size_t(m.partner[i])];
      if (is_collective(op.kind)) {
        ends = true;
        for (OpId x : m.calls[size_t(m.call_of[i])]) ends = ends && x >= 0 && posted[size_t(x)];
      }
      if (ends) done[i] = 1, changed = true;
    }
  }
  return done;
}

TEST(RunDriver, ZeroTimeRunEndsExactlyTheOpsTheFixpointEnds) {
  std::mt19937_64 rng(11);
  int stuck_runs = 0;
  for (int i = 0; i < 150; ++i) {
    Schedule s = engine::random_schedule({uint64_t(1000 + i), 4, 60});
    // Break it at random: a later op as a dependency, or two ops trading streams.
    for (int k = 0; k < 2; ++k) {
      const size_t a = rng() % s.ops.size(), c = rng() % s.ops.size();
      if (a == c || s.ops[a].rank != s.ops[c].rank) continue;
      if (rng() % 2) s.ops[std::min(a, c)].deps.push_back(OpId(std::max(a, c)));
      else std::swap(s.ops[a].stream, s.ops[c].stream);
    }
    const ZeroTimeRun run(s);
    const RunDriver& d = run.d;
    const auto expect = fixpoint(s);
    for (size_t op = 0; op < s.ops.size(); ++op)
      ASSERT_EQ(d.done(OpId(op)), bool(expect[op])) << "case " << i << ": " << describe(s, OpId(op));
    stuck_runs += d.ops_done() < int64_t(s.ops.size());
  }
  EXPECT_GT(stuck_runs, 20);  // the breaking does make deadlocks
}

}  // namespace
}  // namespace rm::schedule
