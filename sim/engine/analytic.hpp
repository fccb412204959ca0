// The analytic engine: a discrete-event list scheduler over the op DAG, for
// sweeps and search (millions of ops per wall second).
// Model: each stream is a serial resource (engine.hpp gives the op semantics).
// Links are shared as SimGrid shares them: a transfer first waits out its
// route's latency, then its bytes flow over every link of the route at the
// max-min fair rate (progressive filling) among the flows in flight, each
// directed link carrying CostModel::link_rate_Bps (flow_network.hpp). Rates
// are recomputed only for the flows that share links with one that starts or
// ends. Alone on its route, a transfer takes exactly
// CostModel::transfer_seconds; between ranks on one GPU it is a local copy
// shared with nothing.
#pragma once

#include "sim/engine/engine.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::engine {

// The Schedule runs through the run driver (sim/schedule/run_driver.hpp);
// pass its plan when the caller has one.
OpTimes run_analytic(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);
// fixed_compute_s: per-op compute seconds that override the CostModel (engine.hpp).
OpTimes run_analytic(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m, const FixedDurations* fixed_compute_s = nullptr);

}  // namespace rm::engine
