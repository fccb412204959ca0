// Replay on hand-built Kineto imports: oracles by hand (a launch chain, a
// synchronize, a collective re-simulated, a missing member's side from the
// recorded duration) and invariants over random imports (a replay without a
// what-if reproduces every recorded event; a faster NIC never slows a step;
// a compute-only trace ignores the NIC).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sim/cost/collective_plan.hpp"
#include "sim/replay/replay.hpp"
#include "tests/sim/replay_support.hpp"

namespace rm::replay {
namespace {

using test::collective;
using test::ImportBuilder;

struct Replayed {
  ReplayPlan plan;
  ReplayResult result;
};

Replayed replay(const traces::KinetoImport& imp, const std::vector<std::string>& what_if = {},
           engine::EngineKind kind = engine::EngineKind::analytic) {
  const Cluster base = test::cluster();
  const topology::Topology bt(base);
  const cost::CostModel bm = replay_cost_model(base);
  Replayed r{build_replay(imp, bt, bm), {}};
  const Cluster c = test::cluster(what_if);
  const topology::Topology t(c);
  r.result = run_replay(r.plan, t, replay_cost_model(c), kind);
  return r;
}

// Every op that stands for a recorded event (or gap) ran when it was recorded.
void expect_reproduced(const Replayed& r, double tol = 1e-12) {
  for (size_t i = 0; i < r.plan.schedule.ops.size(); ++i) {
    if (r.plan.recorded_end[i] < 0) continue;
    EXPECT_NEAR(r.result.times.end[i], r.plan.recorded_end[i], tol) << schedule::describe(r.plan.schedule, int64_t(i))
                                                                    << " " << to_string(r.plan.role[i]);
  }
  for (const auto& rank : r.result.ranks)
    for (const auto& st : rank.steps) {
      EXPECT_NEAR(st.replayed_s, st.recorded_s, tol) << "rank " << rank.rank << " " << st.name;
      EXPECT_NEAR(st.gpu_replayed_s, st.gpu_recorded_s, tol) << "rank " << rank.rank << " " << st.name;
    }
}

TEST(ReplayBuild, TwoKernelChainWithALaunchGapReplaysExactly) {
  ImportBuilder b({0}, 0);
  b.step(0, 0, 1, 5, 80);
  b.launched(0, 0, 10, 7, "k1", 20, 30);
  b.launched(0, 0, 40, 7, "k2", 50, 70);
  const Replayed r = replay(b.imp);
  ASSERT_EQ(r.result.ranks.size(), 1u);
  ASSERT_EQ(r.result.ranks[0].steps.size(), 1u);
  const StepResult& st = r.result.ranks[0].steps[0];
  EXPECT_EQ(st.name, "ProfilerStep#1");
  EXPECT_NEAR(st.recorded_s, 75e-6, 1e-15);
  EXPECT_NEAR(st.replayed_s, 75e-6, 1e-15);
  EXPECT_NEAR(st.gpu_recorded_s, 50e-6, 1e-15);  // k1 start to k2 end
  expect_reproduced(r);
  // k2 started 10 us after its launch: the gap is kept on its stream.
  int gaps = 0;
  for (OpRole role : r.plan.role) gaps += role == OpRole::gpu_gap;
  EXPECT_EQ(gaps, 2);
  EXPECT_TRUE(r.plan.notes.empty());
  // The replayed Timeline: the recorded GPU events, names and op ids, at their replayed times.
  const traces::Timeline tl = replayed_timeline(b.imp, r.plan, r.result, traces::Source::analytic);
  ASSERT_EQ(tl.events.size(), 2u);
  for (const traces::Event& e : tl.events) {
    const traces::Event& rec = b.imp.timeline.events[static_cast<size_t>(e.op)];
    EXPECT_EQ(e.name, rec.name);
    EXPECT_EQ(e.stream, 7);
    EXPECT_NEAR(e.start_s, rec.start_s, 1e-15);
    EXPECT_NEAR(e.end_s, rec.end_s, 1e-15);
  }
}

// k1 runs 80 us; the CPU synchronizes on it (2 us tail after it ends), then launches k2.
ImportBuilder sync_import(bool with_sync) {
  ImportBuilder b({0}, 0);
  b.step(0, 0, 1, 5, 125);
  const int64_t k1 = b.launched(0, 0, 10, 7, "k1", 20, 100);
  if (with_sync) {
    const int64_t s = b.cpu(0, 0, "cudaDeviceSynchronize", 30, 102);
    b.edge(k1, s, traces::EdgeKind::sync);
  }
  b.launched(0, 0, 110, 7, "k2", 115, 120);
  return b;
}

TEST(ReplayBuild, ASynchronizeMakesTheCpuWaitForItsKernel) {
  for (bool with_sync : {true, false}) {
    const ImportBuilder b = sync_import(with_sync);
    Replayed r = replay(b.imp);
    expect_reproduced(r);
    // Halve k1: the CPU, released 40 us earlier by the synchronize, shortens the step by as much.
    for (size_t i = 0; i < r.plan.event.size(); ++i)
      if (r.plan.role[i] == OpRole::gpu && std::abs(r.plan.recorded_start[i] - 20e-6) < 1e-12) r.plan.fixed_s[i] = 40e-6;
    const Cluster c = test::cluster();
    const ReplayResult faster = run_replay(r.plan, topology::Topology(c), replay_cost_model(c),
                                           engine::EngineKind::analytic);
    const StepResult& st = faster.ranks[0].steps[0];
    EXPECT_NEAR(st.replayed_s, with_sync ? 80e-6 : 120e-6, 1e-12) << with_sync;
  }
}

TEST(ReplayBuild, ACollectiveBetweenTwoRecordedRanksIsResimulated) {
  const int64_t bytes = 64 << 20;
  ImportBuilder b({0, 1}, 2);
  const auto c = collective("allreduce", bytes, {0, 1});
  const int64_t a = b.nccl(0, 20, 100, 300, c);
  const int64_t d = b.nccl(1, 20, 150, 300, c);
  b.edge(a, d, traces::EdgeKind::collective);
  const Replayed r = replay(b.imp);
  EXPECT_EQ(r.plan.calls.resimulated, 1);
  EXPECT_TRUE(r.plan.missing_ranks.empty());
  // Ring all-reduce of 2 over one NVSwitch route (a100-40g-4x8-hdr: 300 GB/s x 0.80, 1 + 1 us).
  const double t = cost::collective_seconds(schedule::OpKind::all_reduce, 2, double(bytes), 2e-6, 240e9);
  for (size_t i = 0; i < r.plan.role.size(); ++i)
    if (r.plan.role[i] == OpRole::collective) {
      EXPECT_NEAR(r.result.times.end[i], 150e-6 + t, 1e-9);
    }
}

// Rank 0 of {0, 8} recorded: an all-reduce over the NICs that took 400 us.
ImportBuilder missing_rank_import(double start_us, double end_us) {
  ImportBuilder b({0}, 16);
  b.step(0, 0, 1, 0.5, 500);
  const int64_t k = b.launched(0, 0, 1, 20, "", start_us, end_us);
  b.imp.timeline.events.back().name = "ncclKernel_AllReduce";
  b.imp.collectives[k] = collective("allreduce", 4 << 20, {0, 8});
  const int64_t s = b.cpu(0, 0, "cudaStreamSynchronize", 5, end_us + 3);
  b.edge(k, s, traces::EdgeKind::sync);
  return b;
}

TEST(ReplayBuild, AMissingMembersSideComesFromTheRecordedDuration) {
  const ImportBuilder b = missing_rank_import(10, 410);
  const Replayed r = replay(b.imp);
  EXPECT_EQ(r.plan.calls.missing_members, 1);
  EXPECT_EQ(r.plan.missing_ranks, std::vector<int>{8});
  ASSERT_FALSE(r.plan.notes.empty());
  EXPECT_NE(r.plan.notes.back().find("not recorded"), std::string::npos) << r.plan.notes.back();
  expect_reproduced(r, 1e-12);
  // In the replayed Timeline the NCCL kernel spans its wait, as recorded.
  const traces::Timeline tl = replayed_timeline(b.imp, r.plan, r.result, traces::Source::analytic);
  ASSERT_EQ(tl.events.size(), 1u);
  EXPECT_NEAR(tl.events[0].start_s, 10e-6, 1e-12);
  EXPECT_NEAR(tl.events[0].end_s, 410e-6, 1e-12);
  // Twice the NIC and the PCIe link to it (at 200 Gb/s PCIe is the slower): the
  // call's transfer shrinks, the recorded wait for rank 8 stays.
  const Replayed fast = replay(b.imp, {"cluster.nic.bandwidth_Gbps=400", "cluster.pcie.bandwidth_GBps=50"});
  const double base_step = r.result.ranks[0].steps[0].replayed_s;
  const double fast_step = fast.result.ranks[0].steps[0].replayed_s;
  EXPECT_LT(fast_step, base_step);
  double wait = -1;
  for (size_t i = 0; i < fast.plan.role.size(); ++i)
    if (fast.plan.role[i] == OpRole::nccl_wait) wait = fast.plan.fixed_s[i];
  EXPECT_GT(wait, 0);
  // The saving is the call's.
  double call_base = 0, call_fast = 0;
  for (size_t i = 0; i < fast.plan.role.size(); ++i)
    if (fast.plan.role[i] == OpRole::collective) {
      call_base = r.result.times.end[i] - r.result.times.start[i];
      call_fast = fast.result.times.end[i] - fast.result.times.start[i];
    }
  EXPECT_NEAR(base_step - fast_step, call_base - call_fast, 1e-12);
  // A recorded kernel shorter than the call costs alone: replayed longer, and said so.
  const Replayed slow = replay(missing_rank_import(10, 20).imp);
  EXPECT_EQ(slow.plan.calls.slower_than_recorded, 1);
  EXPECT_GT(slow.result.ranks[0].steps[0].replayed_s, slow.result.ranks[0].steps[0].recorded_s);
}

TEST(ReplayBuild, CallsWithoutGroupOrSizeKeepTheirRecordedDuration) {
  ImportBuilder b({0}, 2);
  traces::KinetoCollective c;
  c.kind = "allreduce";
  c.inferred = true;  // from the kernel name, nothing else recorded
  const int64_t k = b.nccl(0, 20, 10, 50, c);
  (void)k;
  const Replayed r = replay(b.imp);
  EXPECT_EQ(r.plan.calls.fixed.at("no process group recorded"), 1);
  expect_reproduced(r);
  // No ProfilerStep: the whole trace is one step, and the notes say so.
  ASSERT_EQ(r.result.ranks.size(), 1u);
  EXPECT_TRUE(r.result.ranks[0].steps[0].whole_trace);
  EXPECT_NEAR(r.result.ranks[0].steps[0].recorded_s, 40e-6, 1e-15);
  bool said = false;
  for (const auto& n : r.plan.notes) said = said || n.find("no ProfilerStep") != std::string::npos;
  EXPECT_TRUE(said);
}

// A random job of `ranks` recorded ranks (of 16: peers of a collective on
// another node may be missing): a CPU thread launching kernels on two streams
// with gaps, cross-stream waits, synchronizes, and all-reduces with a peer on
// another node, every recorded kernel long enough for its call.
traces::KinetoImport random_import(std::mt19937_64& rng, bool with_nccl) {
  std::uniform_real_distribution<double> u(0, 1);
  ImportBuilder b({0}, 16);
  double cpu = 1;  // the thread's clock, us
  double stream_end[2] = {0, 0};
  std::vector<int64_t> last(2, -1);
  int step = 0;
  double step_start = cpu;
  int64_t seq = 0;
  for (int i = 0; i < 60; ++i) {
    cpu += 1 + 20 * u(rng);
    const int s = u(rng) < 0.7 ? 0 : 1;
    const double launch = cpu;
    cpu += 4;
    double start = std::max(stream_end[s], launch + 1 + 5 * u(rng));
    int64_t waited = -1;
    if (u(rng) < 0.2 && last[1 - s] >= 0) {  // cudaStreamWaitEvent on the other stream's last event
      waited = last[1 - s];
      start = std::max(start, stream_end[1 - s] + 2 * u(rng));
    }
    int64_t k;
    const int stream = s == 0 ? 7 : 20;
    if (with_nccl && s == 1 && u(rng) < 0.5) {
      const double dur = 300 + 200 * u(rng);  // longer than the 1 MB call alone (~55 us over PCIe)
      const int64_t l = b.cpu(0, 0, "cudaLaunchKernel", launch, launch + 4);
      k = b.nccl(0, stream, start, start + dur, collective("allreduce", 1 << 20, {0, 8}, seq++));
      b.edge(l, k, traces::EdgeKind::launch);
    } else {
      k = b.launched(0, 0, launch, stream, "k", start, start + 5 + 100 * u(rng));
    }
    if (waited >= 0) b.edge(waited, k, traces::EdgeKind::sync);
    const double end = b.imp.timeline.events[static_cast<size_t>(k)].end_s * 1e6;
    stream_end[s] = end;
    last[s] = k;
    if (u(rng) < 0.1) {  // the CPU synchronizes on this kernel
      const double sync_end = std::max(cpu, end) + 1 + 3 * u(rng);
      const int64_t y = b.cpu(0, 0, "cudaStreamSynchronize", cpu, sync_end);
      b.edge(k, y, traces::EdgeKind::sync);
      cpu = sync_end;
    }
    if (i % 20 == 19) {
      cpu += 2;
      b.step(0, 0, step++, step_start, cpu);
      step_start = cpu;
    }
  }
  return b.imp;
}

TEST(ReplayBuild, WithoutAWhatIfEveryRandomImportIsReproduced) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 30; ++trial) {
    const auto imp = random_import(rng, trial % 2 == 0);
    const Replayed r = replay(imp);
    ASSERT_EQ(r.result.ranks[0].steps.size(), 3u);
    expect_reproduced(r, 1e-9);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}

TEST(ReplayBuild, DoublingTheNicNeverSlowsAStepAndComputeOnlyTracesIgnoreIt) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const bool nccl = trial % 2 == 0;
    const auto imp = random_import(rng, nccl);
    const Replayed base = replay(imp);
    const Replayed fast = replay(imp, {"cluster.nic.bandwidth_Gbps=400"});
    for (size_t s = 0; s < base.result.ranks[0].steps.size(); ++s) {
      const auto& a = base.result.ranks[0].steps[s];
      const auto& f = fast.result.ranks[0].steps[s];
      if (nccl) {
        EXPECT_LE(f.replayed_s, a.replayed_s + 1e-12) << trial << " " << a.name;
        EXPECT_LE(f.gpu_replayed_s, a.gpu_replayed_s + 1e-12) << trial << " " << a.name;
      } else {
        EXPECT_EQ(f.replayed_s, a.replayed_s) << trial << " " << a.name;
        EXPECT_EQ(f.gpu_replayed_s, a.gpu_replayed_s) << trial << " " << a.name;
      }
    }
  }
}

TEST(ReplayBuild, BothEnginesReplayAlike) {
  std::mt19937_64 rng(3);
  const auto imp = random_import(rng, true);
  const Replayed a = replay(imp, {"cluster.nic.bandwidth_Gbps=400"});
  const Replayed s = replay(imp, {"cluster.nic.bandwidth_Gbps=400"}, engine::EngineKind::simgrid);
  for (size_t i = 0; i < a.result.ranks[0].steps.size(); ++i)
    EXPECT_NEAR(a.result.ranks[0].steps[i].replayed_s, s.result.ranks[0].steps[i].replayed_s, 1e-9);
}

TEST(ReplayBuild, ARankBeyondTheClusterIsRefusedInOneLine) {
  ImportBuilder b({40}, 64);
  b.launched(40, 0, 1, 7, "k", 10, 20);
  const Cluster c = test::cluster();
  try {
    build_replay(b.imp, topology::Topology(c), replay_cost_model(c));
    FAIL() << "accepted rank 40 on 32 GPUs";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 40"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("32 GPUs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rm::replay
