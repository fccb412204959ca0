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

#include <cstdint>
#include <vector>

#include "sim/engine/engine.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::engine {

// The last analytic run of one Schedule and RunPlan, kept so that a cluster
// what-if of it (a sweep's cluster.nic.bandwidth_Gbps axis) can skip the run
// when the run would repeat itself: every input the engine reads is equal bit
// for bit (each compute op's seconds, the local copy rate, each route it used:
// links, fold weights, latency) except link capacities, and a link's capacity
// differs only where it never set a flow's rate and only upwards
// (FlowNetwork::binding: such a link's shares only grow, so max-min sharing
// takes every decision as before). Then the op times are the kept ones, bit
// for bit; otherwise the run goes ahead and is kept instead. Only for the
// Schedule and RunPlan it was filled with: clear() before using another.
class AnalyticReuse {
 public:
  void clear() { valid_ = false, kept_ = {}, times_ = {}; }  // the counters stay
  int64_t runs() const { return runs_; }      // runs made
  int64_t reused() const { return reused_; }  // runs skipped
 private:
  friend OpTimes run_analytic(const schedule::Schedule&, const schedule::RunPlan&, const topology::Topology&,
                              const cost::CostModel&, const FixedDurations*, AnalyticReuse*);

 public:
  // What the kept run read (internal to the engine).
  struct Kept {
    std::vector<double> compute_s, capacity;
    std::vector<char> binding;
    double local_rate = 0;
    std::vector<uint64_t> route_keys;  // (src gpu << 32 | dst gpu), in the order the run first used them
    std::vector<int32_t> route_begin;  // per route: its links in route_links from here (size routes + 1)
    std::vector<int> route_links;
    std::vector<int32_t> route_weights;  // with the data-parallel shortcut: per entry of route_links
    std::vector<double> route_latency;
  };

 private:
  bool valid_ = false;
  Kept kept_;
  OpTimes times_;
  int64_t runs_ = 0, reused_ = 0;
};

// The Schedule runs through the run driver (sim/schedule/run_driver.hpp);
// pass its plan when the caller has one.
OpTimes run_analytic(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);
// fixed_compute_s: per-op compute seconds that override the CostModel (engine.hpp).
OpTimes run_analytic(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m, const FixedDurations* fixed_compute_s = nullptr,
                     AnalyticReuse* reuse = nullptr);

}  // namespace rm::engine
