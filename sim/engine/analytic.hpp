// The analytic engine: a discrete-event list scheduler over the op DAG, for
// sweeps and search (millions of ops per wall second).
// Model: each stream is a serial resource (engine.hpp gives the op semantics).
// Each directed link is a FIFO resource: a transfer, once ready, waits until
// every link of its route is free, then holds them all for bytes / (the
// route's slowest effective rate) and ends one route latency later. Transfers
// are admitted in order of their ready time (ties: event order), so sharing
// is first-come-first-served rather than SimGrid's fair share: on a shared
// link the total time matches, but the first flow ends earlier than it would
// under fair sharing. Contention-free, a transfer takes exactly
// CostModel::transfer_seconds, as in SimGrid.
#pragma once

#include "sim/engine/engine.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::engine {

// The Schedule runs through the run driver (sim/schedule/run_driver.hpp);
// pass its plan when the caller has one.
OpTimes run_analytic(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);
OpTimes run_analytic(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m);

}  // namespace rm::engine
