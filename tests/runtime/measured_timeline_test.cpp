// The measured Timeline: samples fabricated from a small Schedule run by a
// list scheduler over the shared run driver (so the times obey every ordering
// the runtime's would), K iterations each scaled differently (scaling keeps
// every order, and the median iteration's scale is known), each rank's clock
// offset by a known amount. Checks alignment, medians, spread, every op once,
// the errors, planted ordering violations, pack/unpack and a Chrome round trip.
#include "runtime/measured_timeline.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <limits>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "sim/schedule/builder.hpp"
#include "sim/schedule/op_events.hpp"
#include "sim/schedule/run_driver.hpp"
#include "traces/chrome_trace.hpp"

namespace rm::runtime {
namespace {

using schedule::OpId;
using schedule::OpKind;
using schedule::Phase;
using schedule::StreamKind;

// 3 ranks, streams compute (0) and comm (1): per rank attention then a
// gemm; a ring exchange after the attention with joined send+recv runs; an
// all_reduce of the gemms; a broadcast from rank 1; a final elementwise.
schedule::Schedule small_schedule() {
  schedule::ScheduleBuilder b(nlohmann::json::object(), "test-ring");
  const int R = 3;
  for (int r = 0; r < R; ++r) {
    b.add_rank(r);
    b.add_stream(r, StreamKind::compute, "compute");
    b.add_stream(r, StreamKind::comm_intra, "comm");
  }
  std::vector<OpId> attn(R), gemm(R);
  for (int r = 0; r < R; ++r) attn[size_t(r)] = b.compute(r, 0, OpKind::attn_fwd, {Phase::forward, 0, 0}, {1e9 * (r + 1), 4, 64});
  std::vector<schedule::P2PIds> ring;
  for (int r = 0; r < R; ++r) ring.push_back(b.p2p({r, 1, (r + 1) % R, 1, 4096, {Phase::forward, 0, 0}, 1}));
  for (int r = 0; r < R; ++r) {
    const schedule::P2PIds& out = ring[size_t(r)];
    const schedule::P2PIds& in = ring[size_t((r + R - 1) % R)];
    const std::array<OpId, 2> run{std::min(out.send, in.recv), std::max(out.send, in.recv)};
    b.launch_together(run);
    b.add_dep(out.send, attn[size_t(r)]);
    gemm[size_t(r)] = b.compute(r, 0, OpKind::gemm, {Phase::forward, 0, 1}, {2e9, 0, 64}, {in.recv});
  }
  const int world = b.add_group({0, 1, 2}, "world");
  b.collective(world, OpKind::all_reduce, 8192, {Phase::forward, 0, -1}, [](int) { return 1; },
               [&](int r) { return std::vector<OpId>{gemm[size_t(r)]}; });
  b.collective(world, OpKind::broadcast, 512, {Phase::forward, -1, -1}, [](int) { return 1; },
               [](int) { return std::vector<OpId>{}; }, 0, 1);
  for (int r = 0; r < R; ++r) b.compute(r, 0, OpKind::elementwise, {Phase::forward, 1, -1}, {1e6, 0, 64});
  return std::move(b).build();
}

// Start and end of every op on one (rank-0) clock from 0: a list scheduler on
// the run driver; each op lasts a time of its own, a pair transfers once both
// sides are posted, a collective once all members are.
struct Times {
  std::vector<double> start, end;
};

class ListScheduler : public schedule::RunBackend {
 public:
  explicit ListScheduler(const schedule::Schedule& s) : s_(s), plan_(s), driver_(plan_, *this) {
    t_.start.assign(s.ops.size(), 0);
    t_.end.assign(s.ops.size(), 0);
  }
  Times run() {
    driver_.start();
    while (!queue_.empty()) {
      auto [at, op] = queue_.top();
      queue_.pop();
      now_ = at;
      t_.end[size_t(op)] = at;
      driver_.complete(op);
    }
    driver_.check_finished(s_);
    return t_;
  }
  void post(OpId op) override { t_.start[size_t(op)] = now_; }
  void start_compute(OpId op) override { finish(op, now_ + duration(op)); }
  void start_p2p(OpId op, OpId partner) override {
    const double at = now_ + duration(op);
    finish(op, at), finish(partner, at);
  }
  void start_collective(int64_t call) override {
    const auto& members = plan_.match.calls[size_t(call)];
    for (OpId m : members) finish(m, now_ + duration(members[0]));
  }

 private:
  static double duration(OpId op) { return 1e-4 * double(1 + (op * 7) % 5); }
  void finish(OpId op, double at) { queue_.push({at, op}); }
  const schedule::Schedule& s_;
  schedule::RunPlan plan_;
  schedule::RunDriver driver_;
  Times t_;
  double now_ = 0;
  std::priority_queue<std::pair<double, OpId>, std::vector<std::pair<double, OpId>>, std::greater<>> queue_;
};

const nlohmann::json kMeta = {{"schedule_hash", "abc123"}, {"warmup", 2}};

// Iteration i runs the base times scaled by scales[i], from origin[i], seen on
// rank r's clock (rank-0 clock + offsets[r]); samples listed in a shuffled order.
std::vector<RankSamples> fabricate(const schedule::Schedule& s, const Times& base, const std::vector<double>& scales,
                                   const std::vector<double>& offsets, uint64_t seed) {
  std::vector<RankSamples> out(s.ranks.size());
  for (size_t r = 0; r < out.size(); ++r) out[r].rank = int(r), out[r].clock = {offsets[r], 1e-7};
  for (size_t i = 0; i < scales.size(); ++i) {
    const double origin = 1000.0 + 0.5 * double(i);
    for (const auto& op : s.ops) {
      const double off = offsets[size_t(op.rank)];
      out[size_t(op.rank)].samples.push_back({op.id, int(i), origin + base.start[size_t(op.id)] * scales[i] + off,
                                              origin + base.end[size_t(op.id)] * scales[i] + off});
    }
  }
  std::mt19937_64 rng(seed);
  for (auto& r : out) std::shuffle(r.samples.begin(), r.samples.end(), rng);
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

const traces::Event& event_of(const traces::Timeline& t, OpId op) {
  for (const auto& e : t.events)
    if (e.op == op) return e;
  throw std::logic_error("no event");
}

TEST(MeasuredTimeline, MediansSpreadAndAlignmentOverThreeIterations) {
  const auto s = small_schedule();
  const Times base = ListScheduler(s).run();
  ASSERT_EQ(*std::min_element(base.start.begin(), base.start.end()), 0.0);
  const std::vector<double> offsets = {0.0, 3.25, -7.5};
  const auto ranks = fabricate(s, base, {1.2, 1.0, 1.1}, offsets, 1);
  const traces::Timeline t = measured_timeline(s, ranks, traces::Source::runtime_cpu, kMeta);

  EXPECT_EQ(t.source, traces::Source::runtime_cpu);
  ASSERT_EQ(t.events.size(), s.ops.size());
  std::set<OpId> ops;
  for (const auto& e : t.events) ops.insert(e.op);
  EXPECT_EQ(ops.size(), s.ops.size());  // every op exactly once
  EXPECT_TRUE(std::is_sorted(t.events.begin(), t.events.end(), traces::canonical_less));
  for (const auto& op : s.ops) {
    const traces::Event& e = event_of(t, op.id);
    // Aligned on rank 0's clock, from the iteration's start: the median iteration is the 1.1 one.
    EXPECT_NEAR(e.start_s, base.start[size_t(op.id)] * 1.1, 1e-9) << schedule::describe(s, op.id);
    EXPECT_NEAR(e.end_s, base.end[size_t(op.id)] * 1.1, 1e-9) << schedule::describe(s, op.id);
    EXPECT_EQ(e.samples, 3);
    EXPECT_NEAR(e.spread_s, (base.end[size_t(op.id)] - base.start[size_t(op.id)]) * 0.2, 1e-9);
    // The predicted Timelines' fields.
    traces::Event want;
    schedule::fill_event(op, s.desc(op), want);
    EXPECT_EQ(e.name, want.name);
    EXPECT_EQ(e.category, want.category);
    EXPECT_EQ(std::tie(e.rank, e.stream, e.layer, e.phase, e.step, e.bytes, e.flops),
              std::tie(want.rank, want.stream, want.layer, want.phase, want.step, want.bytes, want.flops));
  }
  EXPECT_EQ(event_of(t, 0).name, "attn_fwd L0 s0");
  EXPECT_EQ(t.stream_name(1, 1), "comm");
  EXPECT_EQ(t.rank_name(2), "rank 2 (gpu 2)");
  EXPECT_EQ(t.edges, schedule::timeline_edges(s, schedule::RunPlan(s)));

  EXPECT_EQ(t.metadata["schedule_hash"], "abc123");
  EXPECT_EQ(t.metadata["warmup"], 2);
  EXPECT_EQ(t.metadata["iterations"], 3);
  EXPECT_EQ(t.metadata["generator"], "test-ring");
  EXPECT_EQ(t.metadata["clock_offsets_s"], nlohmann::json(offsets));
  EXPECT_EQ(t.metadata["clock_uncertainties_s"], nlohmann::json({1e-7, 1e-7, 1e-7}));
  EXPECT_EQ(t.metadata["max_clock_uncertainty_s"], 1e-7);
  const double length = *std::max_element(base.end.begin(), base.end.end());
  EXPECT_NEAR(t.metadata["iteration_s"]["median"].get<double>(), length * 1.1, 1e-9);
  EXPECT_NEAR(t.metadata["iteration_s"]["min"].get<double>(), length * 1.0, 1e-9);
  EXPECT_NEAR(t.metadata["iteration_s"]["max"].get<double>(), length * 1.2, 1e-9);
  EXPECT_NEAR(t.metadata["makespan_s"].get<double>(), length * 1.1, 1e-9);

  EXPECT_EQ(dependency_violations(s, t, 0.0), std::vector<std::string>{});
}

TEST(MeasuredTimeline, MediansOfRandomIterationCountsOddAndEven) {
  const auto s = small_schedule();
  const Times base = ListScheduler(s).run();
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int c = 0; c < 40; ++c) {
    const int K = 1 + c % 6;
    std::vector<double> scales(static_cast<size_t>(K)), offsets = {0.0, 100.0 * u(rng) - 50, 100.0 * u(rng) - 50};
    for (double& x : scales) x = 0.5 + u(rng);
    const auto ranks = fabricate(s, base, scales, offsets, rng());
    const traces::Timeline t = measured_timeline(s, ranks, traces::Source::runtime_cuda, kMeta);
    std::vector<double> sorted = scales;
    std::sort(sorted.begin(), sorted.end());
    const double mid = K % 2 ? sorted[size_t(K / 2)] : (sorted[size_t(K / 2 - 1)] + sorted[size_t(K / 2)]) / 2;
    for (const auto& op : s.ops) {
      const traces::Event& e = event_of(t, op.id);
      const double d = base.end[size_t(op.id)] - base.start[size_t(op.id)];
      ASSERT_NEAR(e.start_s, base.start[size_t(op.id)] * mid, 1e-9) << "case " << c;
      ASSERT_NEAR(e.end_s, base.end[size_t(op.id)] * mid, 1e-9) << "case " << c;
      ASSERT_NEAR(e.spread_s, d * (sorted.back() - sorted.front()), 1e-9) << "case " << c;
      ASSERT_EQ(e.samples, K);
    }
    ASSERT_EQ(dependency_violations(s, t, 0.0), std::vector<std::string>{}) << "case " << c;
  }
}

std::string error_of(const schedule::Schedule& s, const std::vector<RankSamples>& ranks,
                     const nlohmann::json& meta = kMeta) {
  try {
    measured_timeline(s, ranks, traces::Source::runtime_cpu, meta);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

TEST(MeasuredTimeline, RefusesMissingDuplicateAndMisplacedSamples) {
  const auto s = small_schedule();
  const Times base = ListScheduler(s).run();
  const auto good = fabricate(s, base, {1.0, 1.1, 1.2}, {0, 1, 2}, 3);
  ASSERT_EQ(error_of(s, good), "no error");
  auto find = [](std::vector<RankSamples>& ranks, int rank) -> RankSamples& {
    return *std::find_if(ranks.begin(), ranks.end(), [&](const RankSamples& r) { return r.rank == rank; });
  };

  auto missing = good;
  auto& r1 = find(missing, 1).samples;
  const OpSample gone = r1.front();
  r1.erase(r1.begin());
  EXPECT_EQ(error_of(s, missing), fmt::format("measured timeline: {}: no sample in iteration {} (of 3)",
                                              schedule::describe(s, gone.op), gone.iteration));

  auto twice = good;
  auto& r2 = find(twice, 2).samples;
  r2.push_back(r2.back());
  EXPECT_EQ(error_of(s, twice), fmt::format("measured timeline: {}: two samples in iteration {}",
                                            schedule::describe(s, r2.back().op), r2.back().iteration));

  auto elsewhere = good;
  auto& r0 = find(elsewhere, 0).samples;
  const OpId foreign = s.ops.back().id;  // rank 2's elementwise
  ASSERT_EQ(s.ops.back().rank, 2);
  r0.push_back({foreign, 0, 1.0, 2.0});
  EXPECT_EQ(error_of(s, elsewhere), fmt::format("measured timeline: {}: sampled by rank 0, but it runs on rank 2",
                                                schedule::describe(s, foreign)));

  auto unknown = good;
  find(unknown, 0).samples.push_back({999, 0, 1.0, 2.0});
  EXPECT_NE(error_of(s, unknown).find("rank 0 sampled op 999, but the Schedule has"), std::string::npos);

  auto backwards = good;
  auto& b0 = find(backwards, 0).samples;
  std::swap(b0[0].start_s, b0[0].end_s);
  EXPECT_NE(error_of(s, backwards).find(schedule::describe(s, b0[0].op) + ": iteration"), std::string::npos);

  auto huge = good;  // a corrupt iteration number: refused without a table of 2^31 iterations
  find(huge, 1).samples[0].iteration = std::numeric_limits<int>::max();
  EXPECT_EQ(error_of(s, huge), fmt::format("measured timeline: {}: no sample in iteration 3 (of {})",
                                           schedule::describe(s, 0), int64_t{std::numeric_limits<int>::max()} + 1));

  auto negative = good;
  find(negative, 0).samples[0].iteration = -1;
  EXPECT_NE(error_of(s, negative).find("iteration -1"), std::string::npos);

  auto dup_rank = good;
  dup_rank.push_back(find(dup_rank, 1));
  EXPECT_EQ(error_of(s, dup_rank), "measured timeline: samples from rank 1 given twice");

  auto bad_rank = good;
  find(bad_rank, 1).rank = 3;
  EXPECT_EQ(error_of(s, bad_rank), "measured timeline: samples from rank 3, but the Schedule has 3 ranks");

  auto bad_clock = good;
  find(bad_clock, 2).clock.offset_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of(s, bad_clock).find("measured timeline: rank 2: clock offset nan s"), std::string::npos)
      << error_of(s, bad_clock);

  auto lost_rank = good;
  lost_rank.erase(std::find_if(lost_rank.begin(), lost_rank.end(), [](const RankSamples& r) { return r.rank == 0; }));
  EXPECT_EQ(error_of(s, lost_rank), fmt::format("measured timeline: {}: no sample in iteration 0 (of 3)",
                                                schedule::describe(s, 0)));

  EXPECT_NE(error_of(s, good, {{"warmup", 1}}).find("metadata.schedule_hash"), std::string::npos);
  EXPECT_NE(error_of(s, good, {{"schedule_hash", "x"}, {"warmup", -1}}).find("metadata.warmup"), std::string::npos);
}

TEST(MeasuredTimeline, DependencyViolationsFindPlantedOnesAndRespectTheTolerance) {
  const auto s = small_schedule();
  const Times base = ListScheduler(s).run();
  const traces::Timeline good =
      measured_timeline(s, fabricate(s, base, {1.0, 1.0, 1.0}, {0, 0, 0}, 7), traces::Source::runtime_cpu, kMeta);
  ASSERT_EQ(dependency_violations(s, good, 0.0), std::vector<std::string>{});
  auto index_of = [&](OpId op) {
    return size_t(std::find_if(good.events.begin(), good.events.end(), [&](const auto& e) { return e.op == op; }) -
                  good.events.begin());
  };
  auto first = [&](OpKind kind, int rank) {
    for (const auto& op : s.ops)
      if (op.kind == kind && op.rank == rank) return op.id;
    throw std::logic_error("no such op");
  };
  auto shifted = [&](OpId op, double by) {  // the op's event moved by `by` seconds
    traces::Timeline t = good;
    t.events[index_of(op)].start_s += by;
    t.events[index_of(op)].end_s += by;
    return t;
  };
  auto single = [&](const traces::Timeline& t, double tol) {
    const auto v = dependency_violations(s, t, tol);
    return v.size() == 1 ? v[0] : fmt::format("{} violations: {}", v.size(), fmt::join(v, " | "));
  };

  // The gemm depends on rank 1's recv (and follows the attention on its stream).
  const OpId gemm = first(OpKind::gemm, 1);
  const OpId recv = s.ops[size_t(gemm)].deps[0];
  const double early = good.events[index_of(gemm)].start_s - good.events[index_of(recv)].end_s + 5e-6;
  EXPECT_EQ(single(shifted(gemm, -early), 0.0),
            fmt::format("{} started 5.000 us before {} ended (a dependency of its run)", schedule::describe(s, gemm),
                        schedule::describe(s, recv)));
  EXPECT_EQ(single(shifted(gemm, -early), 6e-6), "0 violations: ");  // within the clock uncertainty

  // Stream order: the last elementwise on rank 0 before the broadcast... on its own stream, the gemm.
  const OpId attn0 = first(OpKind::attn_fwd, 0), gemm0 = first(OpKind::gemm, 0);
  traces::Timeline overlap = good;
  overlap.events[index_of(attn0)].end_s = good.events[index_of(gemm0)].start_s + 2e-6;
  const auto v = dependency_violations(s, overlap, 0.0);
  ASSERT_FALSE(v.empty());
  EXPECT_NE(v.back().find(schedule::describe(s, gemm0) + " started 2.000 us before " + schedule::describe(s, attn0) +
                          " ended (the previous run on its stream)"),
            std::string::npos)
      << fmt::format("{}", fmt::join(v, " | "));

  // A recv that ends before its send started (rank 2's recv from rank 1).
  const OpId recv2 = first(OpKind::recv, 2);
  const schedule::RunPlan plan(s);
  const OpId send1 = plan.match.partner[size_t(recv2)];
  traces::Timeline early_recv = good;
  early_recv.events[index_of(recv2)].end_s = good.events[index_of(send1)].start_s - 3e-6;
  early_recv.events[index_of(recv2)].start_s = std::min(early_recv.events[index_of(recv2)].start_s,
                                                        early_recv.events[index_of(recv2)].end_s);
  bool found = false;
  for (const auto& line : dependency_violations(s, early_recv, 0.0))
    found |= line == fmt::format("{} ended 3.000 us before its send {} started", schedule::describe(s, recv2),
                                 schedule::describe(s, send1));
  EXPECT_TRUE(found);

  // An all_reduce member that ends before another member started.
  const OpId ar0 = first(OpKind::all_reduce, 0);
  const auto& call = plan.match.calls[size_t(plan.match.call_of[size_t(ar0)])];
  OpId latest = call[0];
  for (OpId m : call)
    if (good.events[index_of(m)].start_s > good.events[index_of(latest)].start_s) latest = m;
  const OpId other = latest == call[0] ? call[1] : call[0];
  traces::Timeline short_member = good;
  short_member.events[index_of(other)].end_s = good.events[index_of(latest)].start_s - 1e-6;
  short_member.events[index_of(other)].start_s =
      std::min(short_member.events[index_of(other)].start_s, short_member.events[index_of(other)].end_s);
  found = false;
  for (const auto& line : dependency_violations(s, short_member, 0.0))
    found |= line == fmt::format("{} ended 1.000 us before {} of the same collective call started",
                                 schedule::describe(s, other), schedule::describe(s, latest));
  EXPECT_TRUE(found);

  // Ops without an event, or with two.
  traces::Timeline lost = good, doubled = good;
  lost.events.erase(lost.events.begin() + long(index_of(gemm)));
  doubled.events.push_back(good.events[index_of(gemm)]);
  EXPECT_EQ(single(lost, 0.0), schedule::describe(s, gemm) + ": 0 events in the Timeline, expected one");
  EXPECT_EQ(single(doubled, 0.0), schedule::describe(s, gemm) + ": 2 events in the Timeline, expected one");
}

TEST(MeasuredTimeline, ChromeTraceRoundTrip) {
  const auto s = small_schedule();
  const Times base = ListScheduler(s).run();
  const traces::Timeline t = measured_timeline(s, fabricate(s, base, {1.3, 0.9, 1.0, 1.1}, {0, -2, 4}, 9),
                                               traces::Source::runtime_cuda, kMeta);
  const auto path = std::filesystem::temp_directory_path() /
                    ("rm_measured_" + std::to_string(::getpid()) + ".json.gz");
  traces::write_chrome_trace(t, path.string());
  const traces::Timeline back = traces::read_chrome_trace(path.string());
  std::filesystem::remove(path);
  EXPECT_TRUE(traces::approx_equal(t, back));
  EXPECT_EQ(back.source, traces::Source::runtime_cuda);
  EXPECT_EQ(back.metadata["iterations"], 4);
  for (const auto& e : back.events) EXPECT_EQ(e.samples, 4);
  EXPECT_EQ(dependency_violations(s, back, 1e-12), std::vector<std::string>{});
}

TEST(MeasuredTimeline, PackUnpackRoundTripAndTruncation) {
  std::mt19937_64 rng(3);
  for (int c = 0; c < 20; ++c) {
    RankSamples r;
    r.rank = int(rng() % 64);
    r.clock = {std::ldexp(double(rng() % 100000), -20) - 0.05, std::ldexp(double(rng() % 1000), -30)};
    for (size_t i = 0, n = rng() % 50; i < n; ++i)
      r.samples.push_back({int64_t(rng() % 1000000), int(rng() % 9), double(rng()) * 1e-12, double(rng()) * 1e-11});
    const std::string bytes = pack(r);
    EXPECT_EQ(unpack(bytes), r);
    for (size_t cut : {size_t(0), size_t(3), bytes.size() / 2, bytes.size() - 1})
      if (cut < bytes.size()) {
        EXPECT_THROW(unpack(std::string_view(bytes).substr(0, cut)), std::runtime_error);
      }
    EXPECT_THROW(unpack(bytes + "x"), std::runtime_error);
  }
  std::string bad = pack(RankSamples{});
  bad[0] = 'x';
  EXPECT_THROW(unpack(bad), std::runtime_error);
}

}  // namespace
}  // namespace rm::runtime
