// Links ringmaster_schedule and nothing else of ours (tests/sim/CMakeLists.txt):
// the runtime executes Schedules through the run driver without SimGrid or
// Boost, so building and running this binary is the check.
#include <gtest/gtest.h>

#include "sim/schedule/builder.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::schedule {
namespace {

TEST(ScheduleAlone, BuildsValidatesAndRunsASchedule) {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  const OpId w = b.compute(0, 0, OpKind::attn_fwd, {}, {1, 0, 0});
  const auto p = b.p2p({0, 1, 1, 1, 64, {}, 0});
  b.add_dep(p.send, w);
  b.collective(b.add_group({0, 1}), OpKind::all_reduce, 64, {}, StreamKind::comm_intra);
  const Schedule s = std::move(b).build();  // validation runs the deadlock check: a driver run
  const RunPlan plan(s);
  struct Now final : RunBackend {
    RunDriver* d = nullptr;
    const RunPlan* p = nullptr;
    void post(OpId) override {}
    void start_compute(OpId op) override { d->complete(op); }
    void start_p2p(OpId op, OpId partner) override { d->complete(op), d->complete(partner); }
    void start_collective(int64_t c) override {
      for (OpId m : p->match.calls[size_t(c)]) d->complete(m);
    }
  } now;
  RunDriver d(plan, now);
  now.d = &d;
  now.p = &plan;
  d.start();
  EXPECT_EQ(d.ops_done(), int64_t(s.ops.size()));
  EXPECT_NO_THROW(d.check_finished(s));
}

}  // namespace
}  // namespace rm::schedule
