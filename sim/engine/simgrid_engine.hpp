// The SimGrid engine: the Schedule on SimGrid 3.32 (S4U) for fidelity, with
// flow-level contention: flows sharing a link split its bandwidth max-min fairly.
//
//   platform:  host gpuG per GPU; each Topology link one SimGrid link
//              (bandwidth x class efficiency, latency); routes =
//              Topology::route, one way each, only for the GPU pairs the
//              schedule uses (sparse bypass routes of one empty zone);
//              gpuG -> gpuG via a non-shared loopback at the local copy rate
//   one replica for all (Schedule::symmetry, symmetry.hpp): routes folded onto
//              orbit representatives, a representative crossed by w
//              translates at capacity / w (docs/simgrid.md)
//
// One actor runs the Schedule through the run driver as an event loop.
// SimGrid carries only the flows: each transfer (a matched send/recv, or one
// PlannedTransfer of a collective) is an asynchronous sendto between the two
// GPU hosts once it is ready. Compute ops stay in the driver's own queue
// (their durations are known); the next compute end is SimGrid's alarm, so
// its clock steps through exactly the dates it stepped through when compute
// ran as SimGrid executions, and the ops ending at one step are handled in
// the order wait_any handed them out then: the Timeline is the same bit for
// bit (run_simgrid_reference, the old way, is the tests' oracle). Transfer
// ends come from SimGrid's signals, not from scanning what is in flight, so
// an op costs the same at 32 and 512 ranks. No actor per transfer: creating
// and switching to them dominated the run time.
// Each simulation runs in a forked child process that sends the op times back
// through a pipe, so one process can run any number of them (a second SimGrid
// engine in one process does not start clean).
// The engine is a module (libringmaster_simgrid.so next to the executable, or
// $RINGMASTER_SIMGRID_MODULE) loaded on the first call: a run that never uses
// SimGrid never loads it (sim/CMakeLists.txt says why; simgrid_loader.cpp).
#pragma once

#include "sim/engine/engine.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::engine {

// Forks, simulates in the child, returns its op times. Throws
// schedule::ScheduleError when the schedule cannot run to the end, and
// std::runtime_error when the child fails.
// The Schedule runs through the run driver (sim/schedule/run_driver.hpp).
OpTimes run_simgrid(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);
// fixed_compute_s: per-op compute seconds that override the CostModel (engine.hpp).
OpTimes run_simgrid(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                    const cost::CostModel& m, const FixedDurations* fixed_compute_s = nullptr);

// The engine as it ran before compute left SimGrid: every compute op a
// SimGrid execution on a host per stream, every activity awaited through
// Activity::wait_any over all in flight (cost grows with the activities in
// flight). Kept as the oracle run_simgrid must match bit for bit.
OpTimes run_simgrid_reference(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);

// The module's one entry point, found by name (kSimGridEntry): it runs `call`
// and fills *call.out, or throws as run_simgrid does.
struct SimGridCall {
  const schedule::Schedule* s;
  const schedule::RunPlan* plan;
  const topology::Topology* t;
  const cost::CostModel* m;
  const FixedDurations* fixed_compute_s;
  bool reference;  // run_simgrid_reference
  OpTimes* out;
};
inline constexpr const char* kSimGridEntry = "ringmaster_simgrid_run_v1";

}  // namespace rm::engine
