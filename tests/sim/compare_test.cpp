// sim/compare: hand-computed errors, MAPE and top contributors on small
// Timelines, invariants over random ones (a Timeline against itself; swapping
// the sides), the side-by-side trace, the CSV, and the errors for Timelines
// that are not of one job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "sim/compare/compare.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/support/random_timeline.hpp"
#include "traces/chrome_trace.hpp"

namespace rm::compare {
namespace {

using traces::Edge;
using traces::EdgeKind;
using traces::Event;
using traces::Timeline;

Event ev(int64_t op, int rank, int stream, const std::string& kind, double start, double end, int layer = -1,
         int step = -1, const std::string& phase = "forward") {
  Event e;
  e.op = op;
  e.rank = rank;
  e.stream = stream;
  e.category = kind;
  e.name = kind + " op" + std::to_string(op);
  e.start_s = start;
  e.end_s = end;
  e.layer = layer;
  e.step = step;
  e.phase = phase;
  return e;
}

// Predicted: ops 0-3; measured: the same ops with other durations.
//   op  rank kind      layer step phase     predicted  measured
//   0   0    attn_fwd  0     0    forward   2          4
//   1   0    send      0     0    forward   1          1
//   2   1    attn_fwd  0     1    forward   3          2
//   3   1    attn_bwd  1     -    backward  5          10
Timeline predicted_small() {
  Timeline t;
  t.source = traces::Source::analytic;
  t.events = {ev(0, 0, 0, "attn_fwd", 0, 2, 0, 0), ev(1, 0, 1, "send", 0, 1, 0, 0),
              ev(2, 1, 0, "attn_fwd", 0, 3, 0, 1), ev(3, 1, 0, "attn_bwd", 3, 8, 1, -1, "backward")};
  return t;
}
Timeline measured_small() {
  Timeline t;
  t.source = traces::Source::runtime_cpu;
  t.events = {ev(0, 0, 0, "attn_fwd", 0, 4, 0, 0), ev(1, 0, 1, "send", 0, 1, 0, 0),
              ev(2, 1, 0, "attn_fwd", 0, 2, 0, 1), ev(3, 1, 0, "attn_bwd", 2, 12, 1, -1, "backward")};
  t.edges = {{2, 3, EdgeKind::stream}};
  t.metadata = {{"iteration_s", {{"median", 13.0}, {"min", 12.0}, {"max", 14.0}}}};
  return t;
}

const GroupRow& row(const std::vector<GroupRow>& rows, const std::string& key) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const GroupRow& r) { return r.key == key; });
  EXPECT_NE(it, rows.end()) << key;
  return *it;
}

TEST(Compare, HandComputedErrorsPerKindRankStepLayerAndPhase) {
  const Comparison c = compare(predicted_small(), measured_small());
  ASSERT_EQ(c.ops.size(), 4u);
  // Step: predicted makespan 8 (no iteration_s), measured iteration median 13.
  EXPECT_DOUBLE_EQ(c.predicted_step_s, 8);
  EXPECT_DOUBLE_EQ(c.measured_step_s, 13);
  EXPECT_DOUBLE_EQ(c.step_error_s, -5);
  EXPECT_DOUBLE_EQ(*c.step_rel_error, -5.0 / 13);
  // attn_fwd: p 2+3 = 5, m 4+2 = 6; |rel| 0.5 and 0.5.
  const Errors& fwd = row(c.by_kind, "attn_fwd").errors;
  EXPECT_EQ(fwd.count, 2);
  EXPECT_DOUBLE_EQ(fwd.predicted_s, 5);
  EXPECT_DOUBLE_EQ(fwd.measured_s, 6);
  EXPECT_DOUBLE_EQ(fwd.error_s, -1);
  EXPECT_DOUBLE_EQ(*fwd.rel_error, -1.0 / 6);
  EXPECT_DOUBLE_EQ(*fwd.mape, 0.5);
  EXPECT_DOUBLE_EQ(*fwd.weighted_mape, 3.0 / 6);
  EXPECT_DOUBLE_EQ(row(c.by_kind, "send").errors.error_s, 0);
  EXPECT_DOUBLE_EQ(row(c.by_kind, "attn_bwd").errors.error_s, -5);
  // By measured time descending: attn_bwd 10, attn_fwd 6, send 1.
  ASSERT_EQ(c.by_kind.size(), 3u);
  EXPECT_EQ(c.by_kind[0].key, "attn_bwd");
  EXPECT_EQ(c.by_kind[2].key, "send");
  // Ranks: 0 has ops 0, 1 (p 3, m 5); 1 has ops 2, 3 (p 8, m 12).
  ASSERT_EQ(c.by_rank.size(), 2u);
  EXPECT_EQ(c.by_rank[0].key, "0");
  EXPECT_DOUBLE_EQ(c.by_rank[0].errors.error_s, -2);
  EXPECT_DOUBLE_EQ(c.by_rank[1].errors.error_s, -4);
  // Steps 0, 1, then "-" (op 3) last.
  ASSERT_EQ(c.by_step.size(), 3u);
  EXPECT_EQ(c.by_step[0].key, "0");
  EXPECT_EQ(c.by_step[2].key, "-");
  EXPECT_DOUBLE_EQ(c.by_step[0].errors.error_s, -2);
  EXPECT_DOUBLE_EQ(c.by_step[1].errors.error_s, 1);
  EXPECT_DOUBLE_EQ(row(c.by_layer, "1").errors.error_s, -5);
  EXPECT_DOUBLE_EQ(row(c.by_phase, "backward").errors.measured_s, 10);
  // MAPE: (0.5 + 0 + 0.5 + 0.5) / 4; weighted (2 + 0 + 1 + 5) / 17.
  EXPECT_DOUBLE_EQ(*c.all.mape, 1.5 / 4);
  EXPECT_DOUBLE_EQ(*c.all.weighted_mape, 8.0 / 17);
  EXPECT_EQ(c.all.mape_ops, 4);
  EXPECT_EQ(c.predicted_only + c.measured_only, 0);
}

TEST(Compare, TopContributorsAreTheMeasuredCriticalPathsLargestErrors) {
  // Measured: the path ends at op 3 (ends last, at 12) and went through op 2
  // (its stream edge); op 0 (error -2) is not on it, so it is not listed.
  const Comparison c = compare(predicted_small(), measured_small());
  EXPECT_EQ(c.top_basis, "measured critical path");
  EXPECT_EQ(c.path_ops, 2);
  EXPECT_DOUBLE_EQ(c.path_error_s, -5 + 1);
  ASSERT_EQ(c.top.size(), 2u);
  EXPECT_EQ(c.top[0].op.op, 3);
  EXPECT_DOUBLE_EQ(c.top[0].error_s, -5);
  EXPECT_EQ(c.top[1].op.op, 2);
  // Without edges: every joined op, by |error| (ties by op id: 0 and 2 have |error| 2 and 1).
  Timeline m = measured_small();
  m.edges.clear();
  const Comparison all = compare(predicted_small(), m, {.top_n = 3});
  EXPECT_EQ(all.top_basis, "all joined ops");
  ASSERT_EQ(all.top.size(), 3u);
  EXPECT_EQ(all.top[0].op.op, 3);
  EXPECT_EQ(all.top[1].op.op, 0);
  EXPECT_EQ(all.top[2].op.op, 2);
}

TEST(Compare, TopContributorsMatchABruteForceRankingOverRandomChains) {
  // One stream of n ops back to back on each side: the measured critical path
  // is every op, so the top list is all ops by |error| (brute force: sort).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> d(0.1, 2.0);
  for (int round = 0; round < 20; ++round) {
    const int n = 3 + round;
    Timeline p, m;
    double tp = 0, tm = 0;
    for (int i = 0; i < n; ++i) {
      const double a = d(rng), b = d(rng);
      p.events.push_back(ev(i, 0, 0, "gemm", tp, tp + a));
      m.events.push_back(ev(i, 0, 0, "gemm", tm, tm + b));
      tp += a, tm += b;
      if (i > 0) m.edges.push_back({i - 1, i, EdgeKind::stream});
    }
    const Comparison c = compare(p, m, {.top_n = 5});
    std::vector<std::pair<double, int64_t>> brute;
    for (int i = 0; i < n; ++i)
      brute.push_back({-std::abs(p.events[size_t(i)].duration_s() - m.events[size_t(i)].duration_s()), i});
    std::sort(brute.begin(), brute.end());
    ASSERT_EQ(c.top.size(), std::min<size_t>(5, size_t(n)));
    for (size_t k = 0; k < c.top.size(); ++k) EXPECT_EQ(c.top[k].op.op, brute[k].second) << "round " << round;
    EXPECT_EQ(c.path_ops, n);
    // A chain's step is the sum of its durations: the path explains all of the step error.
    EXPECT_NEAR(c.path_error_s, c.step_error_s, 1e-9);
  }
}

TEST(Compare, ATimelineAgainstItselfHasNoErrorAnywhere) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const Timeline t = traces::testing::random_timeline(seed, 300);
    const Comparison c = compare(t, t);
    EXPECT_EQ(c.step_error_s, 0);
    EXPECT_EQ(c.all.error_s, 0);
    EXPECT_EQ(c.predicted_only + c.measured_only, 0);
    if (c.all.mape) {
      EXPECT_EQ(*c.all.mape, 0);
    }
    for (const auto* rows : {&c.by_kind, &c.by_rank, &c.by_step, &c.by_layer, &c.by_phase})
      for (const GroupRow& r : *rows) EXPECT_EQ(r.errors.error_s, 0) << r.key;
    for (const Contributor& x : c.top) EXPECT_EQ(x.error_s, 0);
  }
}

TEST(Compare, SwappingTheSidesFlipsEverySign) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> scale(0.5, 2.0);
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const Timeline p = traces::testing::random_timeline(seed, 300);
    Timeline m = p;
    for (Event& e : m.events) e.end_s = e.start_s + e.duration_s() * scale(rng);
    const Comparison a = compare(p, m), b = compare(m, p);
    EXPECT_NEAR(a.step_error_s, -b.step_error_s, 1e-12);
    EXPECT_NEAR(a.all.error_s, -b.all.error_s, 1e-9);
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (size_t i = 0; i < a.ops.size(); ++i) EXPECT_NEAR(a.ops[i].error_s(), -b.ops[i].error_s(), 1e-12);
    for (auto rows : {&Comparison::by_kind, &Comparison::by_rank, &Comparison::by_step, &Comparison::by_layer,
                      &Comparison::by_phase}) {
      // Named tables sort by measured time, which the swap changes: compare by key.
      for (const GroupRow& r : a.*rows) EXPECT_NEAR(r.errors.error_s, -row(b.*rows, r.key).errors.error_s, 1e-9);
    }
  }
}

TEST(Compare, OpsOnOneSideOnlyAreCountedNotDropped) {
  Timeline p = predicted_small(), m = measured_small();
  p.events.push_back(ev(7, 0, 0, "gemm", 9, 10));
  m.events.push_back(ev(8, 1, 1, "recv", 0, 1));
  m.events.push_back(ev(9, 1, 1, "recv", 1, 2));
  const Comparison c = compare(p, m);
  EXPECT_EQ(c.ops.size(), 4u);
  EXPECT_EQ(c.predicted_only, 1);
  EXPECT_EQ(c.measured_only, 2);
  EXPECT_EQ(c.measured_only_by_kind.at("recv"), 2);
  EXPECT_EQ(c.predicted_only_ops, std::vector<int64_t>{7});
  EXPECT_EQ(c.measured_only_ops, (std::vector<int64_t>{8, 9}));
  const auto j = to_json(c);
  EXPECT_EQ(j["ops"]["predicted_only"], 1);
  EXPECT_EQ(j["ops"]["measured_only_by_kind"]["recv"], 2);
}

TEST(Compare, ZeroMeasuredOpsAreLeftOutOfMapeAndCounted) {
  Timeline p = predicted_small(), m = measured_small();
  m.events[1].end_s = m.events[1].start_s;  // the send measured 0 s
  const Comparison c = compare(p, m);
  EXPECT_EQ(c.all.mape_ops, 3);
  EXPECT_DOUBLE_EQ(*c.all.mape, 1.5 / 3);
  EXPECT_FALSE(row(c.by_kind, "send").errors.mape.has_value());
  EXPECT_FALSE(row(c.by_kind, "send").errors.rel_error.has_value());
  EXPECT_EQ(to_json(c)["mape"]["zero_measured_ops"], 1);
}

TEST(Compare, ErrorsWithinTheMeasuredSpreadAreCounted) {
  Timeline m = measured_small();
  for (Event& e : m.events) e.samples = 5;
  m.events[0].spread_s = 2.0;  // op 0: |error| 2, within
  m.events[2].spread_s = 0.5;  // op 2: |error| 1, not within
  m.events[3].spread_s = 5.0;  // op 3: |error| 5, within (the bound is inclusive)
  // op 1: error 0 and spread 0: within
  const Comparison c = compare(predicted_small(), m);
  EXPECT_EQ(c.all.within_spread, 3);
  EXPECT_EQ(row(c.by_kind, "attn_fwd").errors.within_spread, 1);
  // Unrepeated measurements (samples 0) are never within a spread.
  EXPECT_EQ(compare(predicted_small(), measured_small()).all.within_spread, 0);
}

std::string error_of(const Timeline& p, const Timeline& m) {
  try {
    compare(p, m, {.predicted_name = "P.json", .measured_name = "M.json"});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Compare, RefusesTimelinesOfDifferentJobsOrSchedules) {
  Timeline p = predicted_small(), m = measured_small();
  p.metadata["schedule_hash"] = "aaaa";
  m.metadata["schedule_hash"] = "bbbb";
  EXPECT_EQ(error_of(p, m), "M.json: schedule_hash bbbb, but P.json has aaaa: they ran different Schedules");
  m.metadata["schedule_hash"] = "aaaa";
  EXPECT_EQ(error_of(p, m), "");
  m.events.push_back(ev(4, 2, 0, "gemm", 0, 1));
  EXPECT_EQ(error_of(p, m), "M.json: ranks 0-2, but P.json has ranks 0-1: not the same job");
  m = measured_small();
  m.events[0].category = "gemm";
  EXPECT_EQ(error_of(p, m), "M.json: op 0 on rank 0 is gemm there but attn_fwd in P.json: not the same Schedule");
  EXPECT_EQ(error_of(p, Timeline{}), "M.json: no events (expected a Timeline of a Schedule's ops)");
  Timeline no_ops = measured_small();
  for (Event& e : no_ops.events) e.op = -1;
  EXPECT_EQ(error_of(p, no_ops), "M.json: no event carries an op id (args.op): nothing to join on");
}

TEST(Compare, StepTimeIsTheMedianIterationWhenMeasuredElseTheMakespan) {
  Timeline t = predicted_small();
  EXPECT_DOUBLE_EQ(step_time_s(t), 8);
  t.metadata["iteration_s"] = {{"median", 9.5}};
  EXPECT_DOUBLE_EQ(step_time_s(t), 9.5);
  t.metadata["iteration_s"] = "oops";
  EXPECT_DOUBLE_EQ(step_time_s(t), 8);
}

TEST(Compare, SideBySidePutsPredictedRanksAboveMeasuredAndRoundTrips) {
  Timeline p = predicted_small(), m = measured_small();
  p.rank_names[0] = "rank 0 (gpu 0)";
  const Timeline both = side_by_side(p, m);
  EXPECT_EQ(side_by_side_offset(p, m), 100);
  EXPECT_EQ(both.events.size(), 8u);
  EXPECT_EQ(both.ranks(), (std::vector<int>{0, 1, 100, 101}));
  EXPECT_EQ(both.rank_name(0), "predicted rank 0 (gpu 0)");
  EXPECT_EQ(both.rank_name(1), "predicted rank 1");
  EXPECT_EQ(both.rank_name(101), "measured rank 1");
  EXPECT_TRUE(both.edges.empty());
  EXPECT_EQ(both.metadata["side_by_side"]["measured_pid_offset"], 100);
  EXPECT_EQ(both.metadata["side_by_side"]["measured"]["source"], "runtime-cpu");
  // Measured rank 1's events are measured's, shifted.
  const auto on = both.on_rank(101);
  ASSERT_EQ(on.size(), 2u);
  EXPECT_DOUBLE_EQ(on[1]->end_s, 12);
  EXPECT_TRUE(traces::approx_equal(traces::from_chrome_json(traces::to_chrome_json(both), "both"), both));
  // Many ranks: the offset is the next power of ten.
  m.events.push_back(ev(5, 250, 0, "gemm", 0, 1));
  EXPECT_EQ(side_by_side_offset(p, m), 1000);
}

TEST(Compare, CsvHasOneRowPerJoinedOp) {
  const Comparison c = compare(predicted_small(), measured_small());
  std::istringstream in(to_csv(c));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "op,rank,stream,kind,layer,step,phase,predicted_start_s,predicted_end_s,predicted_s,measured_start_s,"
            "measured_end_s,measured_s,error_s,measured_spread_s,samples");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[3], "3,1,0,attn_bwd,1,,backward,3,8,5,2,12,10,-5,0,0");
}

TEST(Compare, JsonHasEveryTable) {
  const auto j = to_json(compare(predicted_small(), measured_small()));
  for (const char* k : {"step", "mape", "ops", "all", "by_kind", "by_phase", "by_rank", "by_step", "by_layer",
                        "top_contributors"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["by_step"][2]["step"], nullptr);
  EXPECT_EQ(j["by_rank"][1]["rank"], 1);
  EXPECT_DOUBLE_EQ(j["top_contributors"]["ops"][0]["share_of_step_error"].get<double>(), 1.0);
}

// The committed tiny run (tests/data/compare/README.md) against its Schedule.
const std::string kData = std::string(RINGMASTER_SOURCE_DIR) + "/tests/data/compare/";

std::string schedule_error_of(const schedule::Schedule& s, const Timeline& m) {
  try {
    check_against_schedule(s, "S.json.gz", m, "M.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Compare, TheTinyRunMatchesItsScheduleAndRefusesOthers) {
  const schedule::Schedule s = schedule::read_schedule(kData + "tiny-ring.json.gz");
  const Timeline m = traces::read_chrome_trace(kData + "tiny-ring-measured.json.gz");
  EXPECT_EQ(schedule_error_of(s, m), "");
  Timeline other = m;
  other.metadata["schedule_hash"] = "0123";
  EXPECT_NE(schedule_error_of(s, other).find("M.json: schedule_hash 0123, but S.json.gz hashes to "), std::string::npos);
  other = m;
  for (Event& e : other.events)
    if (e.rank == 1) e.rank = 2;
  EXPECT_NE(schedule_error_of(s, other).find("M.json: ranks 0, 2, but S.json.gz has ranks 0-1"), std::string::npos);
  other = m;
  other.events[0].category = "broadcast";
  EXPECT_NE(schedule_error_of(s, other).find("M.json: event 0 is op"), std::string::npos);
  other = m;
  other.events[0].op = int64_t(s.ops.size());
  EXPECT_NE(schedule_error_of(s, other).find("but S.json.gz has"), std::string::npos);
}

// Issue 41: one op on two events would be joined and counted twice; an edge naming
// an op the Schedule lacks would be dropped by the critical path without a word.
TEST(Compare, AnOpOnTwoEventsOrAnEdgeOffTheScheduleIsRefused) {
  const schedule::Schedule s = schedule::read_schedule(kData + "tiny-ring.json.gz");
  const Timeline m = traces::read_chrome_trace(kData + "tiny-ring-measured.json.gz");
  Timeline other = m;
  size_t first = 0;
  while (other.events[first].op < 0) ++first;
  other.events.push_back(other.events[first]);
  EXPECT_EQ(schedule_error_of(s, other),
            fmt::format("M.json: events {} and {} both carry op {} (expected one event per op: {})", first,
                        other.events.size() - 1, other.events[first].op,
                        schedule::describe(s, other.events[first].op)));
  for (const auto& [from, to] : {std::pair<int64_t, int64_t>{3, int64_t(s.ops.size())}, {-1, 3}}) {
    other = m;
    other.edges.push_back({from, to, traces::EdgeKind::dependency});
    EXPECT_EQ(schedule_error_of(s, other),
              fmt::format("M.json: otherData.edges[{}] names op {}, but S.json.gz has ops 0..{}", m.edges.size(),
                          from < 0 ? from : to, s.ops.size() - 1));
  }
}

}  // namespace
}  // namespace rm::compare
