// The step report of one Schedule run many times (a sweep's cluster
// what-ifs, a planner's candidates), read straight from the engine's op times:
// no Timeline is built, and what the report reads of the Schedule alone
// (FLOPs, planned imbalance, the edge graph, the transfers' endpoints and
// bytes, each op's phase) is worked out once in a ReportPrep. The result is
// the StepReport that make_step_report and bound_by give on
// engine::to_timeline's Timeline of the same times, figure for figure
// (tests/sim/fast_report_test.cpp checks it field by field).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/report/op_spans.hpp"
#include "sim/report/report_core.hpp"
#include "sim/report/step_report.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"
#include "traces/timeline.hpp"

namespace rm::report {

// What the report reads of s alone; e's schedule-key fields (block sizes,
// head_dim: pipeline::schedule_key) must be those s was generated for.
// edges: schedule::timeline_edges(s, plan). Keeps no reference to its arguments.
struct ReportPrep {
  ReportPrep(const Experiment& e, const schedule::Schedule& s, const schedule::RunPlan& plan,
             const std::vector<traces::Edge>& edges);
  StepSums sums;
  EdgeGraph graph;
  core::FlowPlan flows;
  // Per stream of plan.streams: its rank and kind (1 compute, 0 communication,
  // -1 not declared by its rank); per op its phase.
  std::vector<int> stream_rank;
  std::vector<signed char> stream_kind;
  std::vector<schedule::Phase> phase;
};

// What fast_step_report worked out from one run's op times alone: everything
// but bound_by's rate-dependent figures. A point with the same op times (a
// cluster what-if whose engine run repeated the last: engine::AnalyticReuse)
// takes them from here and only finishes bound_by under its own link rates.
struct TimedParts {
  bool valid = false, has_traffic = false;
  StepReport report;  // without bound_by
  core::LinkTraffic traffic;
};

// The report of op times (every op of s has times) from an engine run on t
// and m; bound_by is filled when with_bound_by (the planner skips it on the
// candidates it prunes). With `keep`, what depends on the times alone is kept
// there; with same_times too (the caller knows these times are the ones kept:
// same Schedule, bit-identical op times) it is read from there instead.
StepReport fast_step_report(const Experiment& e, const schedule::Schedule& s, const schedule::RunPlan& plan,
                            const ReportPrep& prep, const OpSpans& times, const topology::Topology& t,
                            const cost::CostModel& m, bool with_bound_by = true, TimedParts* keep = nullptr,
                            bool same_times = false);

}  // namespace rm::report
