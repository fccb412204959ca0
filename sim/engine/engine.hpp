// Engines turn (Schedule, Topology, CostModel) into a predicted Timeline.
// Both engines run the Schedule with the runtime's semantics: a stream runs
// its ops in id order, one run at a time (an op plus the p2p ops joined to
// it, which start together); an op starts when its stream reaches it and its
// dependencies have ended; a send/recv pair transfers once both have started
// and both end when the transfer ends; a collective starts once every member
// has started, runs as the CostModel's transfer plan, and each member ends
// when its last transfer (sent or received) ends.
//   analytic — a discrete-event list scheduler, links serialised (analytic.hpp);
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
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"
#include "traces/timeline.hpp"

namespace rm::engine {

enum class EngineKind { analytic, simgrid };
std::string_view to_string(EngineKind k);
std::optional<EngineKind> parse_engine_kind(std::string_view s);

// Per op id: when it started and ended, in seconds from 0.
struct OpTimes {
  std::vector<double> start;
  std::vector<double> end;
};

traces::Timeline simulate(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m,
                          EngineKind kind);

// One event per op (name = kind, category = kind, layer/phase/step, bytes,
// flops), stream names from the Schedule, canonical order. metadata holds
// "generator" and "makespan_s".
traces::Timeline to_timeline(const schedule::Schedule& s, const OpTimes& times, traces::Source source);

}  // namespace rm::engine
