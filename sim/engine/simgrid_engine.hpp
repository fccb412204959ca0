// The SimGrid engine: the Schedule on SimGrid 3.32 (S4U) for fidelity, with
// flow-level contention: flows sharing a link split its bandwidth max-min fairly.
//
//   platform:  host gpuG per GPU (network endpoint)      host rRsS per stream
//              gpuA ─[link]─[link]─...─ gpuB              (runs that stream's
//              each Topology link one SimGrid link         executions, so a
//              (bandwidth x class efficiency, latency),    stream is a serial
//              routes = Topology::route, one way each;     resource and streams
//              gpuG -> gpuG via a non-shared loopback      never share a core)
//              at the local copy rate
//
// One actor runs the Schedule through the run driver as an event loop: compute is an
// asynchronous execution of compute_seconds x 1e9 flops on a 1 GFLOP/s stream
// host; each transfer (a matched send/recv, or one PlannedTransfer of a
// collective) is an asynchronous sendto between the two GPU hosts once it is
// ready; the driver handles whichever activity ends next. No actor per
// transfer: creating and switching to them dominated the run time.
// Each simulation runs in a forked child process that sends the op times back
// through a pipe, so one process can run any number of them (a second SimGrid
// engine in one process does not start clean).
#pragma once

#include "sim/engine/engine.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::engine {

// Forks, simulates in the child, returns its op times. Throws
// schedule::ScheduleError when the schedule cannot run to the end, and
// std::runtime_error when the child fails.
// The Schedule runs through the run driver (sim/schedule/run_driver.hpp).
OpTimes run_simgrid(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);
OpTimes run_simgrid(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                    const cost::CostModel& m);

}  // namespace rm::engine
