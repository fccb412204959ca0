// The op-times form of the report (report::fast_step_report, what
// pipeline::Session::run_point runs for sweep points and plan candidates)
// against the Timeline form (make_step_report + bound_by on the engine's
// Timeline, what `simulate` runs): on many random configurations (scopes,
// ring kinds, partitions, parallel degrees, patterns, both engines, cluster
// what-ifs sharing one Schedule) every field is the same, exactly.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/report_core.hpp"
#include "sim/report/step_report.hpp"
#include "tests/support/bound_by_compare.hpp"

namespace rm::pipeline {
namespace {

Experiment load(const std::vector<std::string>& sets) {
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", sets);
}

using test::expect_same_links;

// One random configuration of the default experiment cut to 2 layers of 8K
// tokens (some draws are combinations the experiment refuses: the test draws again).
std::vector<std::string> draw(std::mt19937& rng) {
  auto pick = [&rng](const std::vector<std::string>& v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  std::vector<std::string> sets{"workload.seq_len=8k", "model.layers=2"};
  sets.push_back("scope=" + pick({"attention_fwd", "attention_fwd_bwd", "layer", "step"}));
  const std::string ring = pick({"ring", "hierarchical", "double_ring"});
  sets.push_back("parallel.ring=" + ring);
  if (ring == "double_ring") sets.push_back("parallel.window=" + pick({"2", "4"}));
  if (ring == "ring") sets.push_back("parallel.ring_order=" + pick({"rank", "zigzag_pairs", "topology"}));
  sets.push_back("parallel.partition=" + pick({"contiguous", "zigzag", "stripe", "balanced"}));
  sets.push_back("parallel.cp=" + pick({"4", "8", "16"}));
  sets.push_back("parallel.hp=" + pick({"1", "2"}));
  sets.push_back("parallel.tp=" + pick({"1", "1", "2"}));
  sets.push_back("parallel.shuffle=" + pick({"per_call", "once"}));
  sets.push_back("parallel.checkpoint=" + pick({"none", "full", "selective"}));
  sets.push_back("parallel.grad_comm_dtype=" + pick({"fp32", "bf16"}));
  if (pick({"sparse", "sparse", "dense"}) == "dense") {
    sets.push_back("workload.pattern=dense-causal");
    sets.push_back("kernel.attention=" + pick({"fa2", "block_sparse"}));
  }
  return sets;
}

TEST(FastReport, EqualsTheTimelineReportOnRandomConfigurations) {
  std::mt19937 rng(20261202);
  int compared = 0, simgrid = 0;
  for (int trial = 0; trial < 200 && compared < 24; ++trial) {
    const std::vector<std::string> sets = draw(rng);
    const engine::EngineKind kind =
        compared % 6 == 5 ? engine::EngineKind::simgrid : engine::EngineKind::analytic;
    Session fast;
    // The configuration, then two NIC what-ifs on the same Session: they reuse its Schedule and ReportPrep.
    for (const char* nic : {"", "cluster.nic.bandwidth_Gbps=25", "cluster.nic.bandwidth_Gbps=800"}) {
      std::vector<std::string> with = sets;
      if (*nic) with.push_back(nic);
      Experiment e;
      schedule::Schedule s;
      try {
        e = load(with);
        s = Session().schedule(e);
      } catch (const ConfigError&) {
        break;  // a combination the experiment refuses: draw another
      }
      const Simulation slow = simulate_schedule(e, s, kind);
      const PointResult point = fast.run_point(e, kind);
      ASSERT_TRUE(point.report.bound_by && slow.report.bound_by);
      EXPECT_EQ(report::to_json(point.report).dump(), report::to_json(slow.report).dump()) << fmt::format("{}", fmt::join(with, " "));
      expect_same_links(*point.report.bound_by, *slow.report.bound_by);
      EXPECT_EQ(point.report.critical_path.ops, slow.report.critical_path.ops);
      EXPECT_EQ(point.ops, int64_t(slow.schedule.ops.size()));
      // Without bound-by: the same report, bound_by left out.
      report::StepReport bare = fast.run_point(e, kind, false).report;
      EXPECT_FALSE(bare.bound_by);
      bare.bound_by = slow.report.bound_by;
      EXPECT_EQ(report::to_json(bare).dump(), report::to_json(slow.report).dump());
      if (!*nic) ++compared, simgrid += kind == engine::EngineKind::simgrid;
    }
  }
  EXPECT_EQ(compared, 24);
  EXPECT_GE(simgrid, 3);
}

}  // namespace
}  // namespace rm::pipeline

namespace rm::report {
namespace {

// sort_intervals gives std::sort's order on many random inputs with ties, few runs or many.
TEST(FastReport, SortIntervalsGivesStdSortsOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 5000)(rng);
    const int distinct = std::uniform_int_distribution<int>(1, 300)(rng);  // few values: many ties
    auto time = [&] {
      const int k = std::uniform_int_distribution<int>(0, distinct)(rng);
      return k == 0 ? (trial % 2 ? -0.0 : 0.0) : double(k) * 1e-3 - (trial % 3 == 0 ? 0.1 : 0.0);
    };
    // A few sorted runs (streams), or many (then the fallback).
    const int runs = std::uniform_int_distribution<int>(1, trial % 4 ? 12 : 40)(rng);
    std::vector<core::Interval> iv;
    for (int r = 0; r < runs; ++r) {
      std::vector<core::Interval> run(n / size_t(runs));
      for (auto& x : run) x.first = time(), x.second = x.first + double(std::uniform_int_distribution<int>(0, 3)(rng));
      std::sort(run.begin(), run.end());
      iv.insert(iv.end(), run.begin(), run.end());
    }
    auto iv_want = iv;
    std::sort(iv_want.begin(), iv_want.end());
    core::sort_intervals(iv);
    EXPECT_EQ(iv, iv_want);
  }
}

}  // namespace
}  // namespace rm::report
