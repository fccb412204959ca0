// Engines turn (Schedule, Topology, CostModel) into a predicted Timeline.
// Both run the Schedule through the run driver (sim/schedule/run_driver.hpp),
// which defines the runtime's semantics once; the engines add time: a
// send/recv pair ends when its transfer ends; a collective runs as the
// CostModel's transfer plan, and each member ends when its last transfer
// (sent or received) ends.
//   analytic — a discrete-event list scheduler, links shared max-min fairly (analytic.hpp);
//   simgrid  — SimGrid 3.32 S4U with max-min fair link sharing, run in a
//              forked child process (simgrid_engine.hpp).
// Both are deterministic: the same input gives the same Timeline, byte for byte.
// The Schedule must be valid (schedule::validate); a schedule that cannot run
// to the end throws schedule::ScheduleError naming a stuck op.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/schedule/op_events.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"
#include "traces/timeline.hpp"

namespace rm::engine {

enum class EngineKind { analytic, simgrid };
std::string_view to_string(EngineKind k);
std::optional<EngineKind> parse_engine_kind(std::string_view s);

// Per op id: a compute op's seconds that replace the CostModel's where >= 0
// (trace replay keeps recorded kernel durations: sim/replay/); -1 elsewhere.
// Absent (nullptr) everywhere else, so every other prediction is unchanged.
using FixedDurations = std::vector<double>;

// Per op id: when it started and ended, in seconds from 0.
struct OpTimes {
  std::vector<double> start;
  std::vector<double> end;
};

traces::Timeline simulate(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m,
                          EngineKind kind);
// The same with s's RunPlan (and optionally timeline_edges(s, plan)) already
// built: a caller that runs one Schedule many times, as a sweep's cluster
// what-ifs do, builds them once.
traces::Timeline simulate(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                          const cost::CostModel& m, EngineKind kind,
                          const std::vector<traces::Edge>* edges = nullptr,
                          const FixedDurations* fixed_compute_s = nullptr);

// One event per op (name "attn_fwd L3 s2": kind, then layer and ring step
// when >= 0; category = kind; layer/phase/step, bytes, flops), stream names
// from the Schedule, canonical order, and the run graph's typed edges
// (timeline_edges). metadata holds "generator" and "makespan_s".
traces::Timeline to_timeline(const schedule::Schedule& s, const OpTimes& times, traces::Source source);
traces::Timeline to_timeline(const schedule::Schedule& s, const schedule::RunPlan& plan, const OpTimes& times,
                             traces::Source source, const std::vector<traces::Edge>* edges = nullptr);

// The event names and typed edges engines use (sim/schedule/op_events.hpp:
// shared with the runtime's measured Timelines).
using schedule::event_name;
using schedule::timeline_edges;

}  // namespace rm::engine
