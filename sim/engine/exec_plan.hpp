// What both engines add to the run driver's plan (schedule::RunPlan): each
// op's compute seconds, each rank's GPU, and the collective calls in flight as
// the CostModel's transfer plans. The driver decides what starts when; this is
// how long it takes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/call_shape.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::engine {

struct ExecPlan {
  // fixed_compute_s (FixedDurations): where an entry is >= 0 it is that compute op's seconds.
  ExecPlan(const schedule::Schedule& s, const schedule::RunPlan& run, const cost::CostModel& m,
           const FixedDurations* fixed_compute_s = nullptr);
  const schedule::RunPlan& run;
  std::vector<double> compute_s;  // per op: CostModel::compute_seconds (or the fixed one); 0 for comm
  std::vector<int> gpu_of_rank;
};

// The collective's transfer plan for `call` (root resolved from the broadcast
// op's peer).
std::vector<cost::PlannedTransfer> plan_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t call);

// A call's transfer plan and what follows from it alone: the transfers waiting
// on each transfer (CSR), each transfer's dependency count, and how many
// transfers touch each member. It depends on the call's kind, size, bytes and
// root only (and the replica count for a group spanning replicas), and a step
// repeats a few shapes over hundreds of calls (every layer's gradient
// collectives), so a run plans each shape once (CallShapes).
struct CallShape {
  std::vector<cost::PlannedTransfer> plan;
  std::vector<int32_t> dependents_begin, dependents;
  std::vector<int32_t> deps;         // per transfer: the plan's transfers it waits for
  std::vector<int32_t> member_left;  // per member slot: the transfers touching it
};
// A collective call in flight, as both engines run it: its shape and how many
// transfers still touch each member (a member's op ends with its last one).
struct CallRun {
  std::shared_ptr<const CallShape> shape;  // released after the call's last transfer
  std::vector<int32_t> member_left;
  int64_t base = 0;  // its transfers in the engine's transfer list from here
  // A call over a group spanning replicas (symmetry.hpp): its members in replica 0;
  // plan members are then full member indices, member m standing for slot(m) of
  // replica m / fold. 0: an ordinary call.
  int32_t fold = 0;
  int slot(int m) const { return fold > 0 ? m % fold : m; }
  const std::vector<cost::PlannedTransfer>& plan() const { return shape->plan; }
};
// The shapes planned so far in one run.
using CallShapes = std::map<schedule::CallShapeKey, std::shared_ptr<const CallShape>>;
// One planned transfer of a call, as the engines queue it.
struct Xfer {
  int64_t call;
  int32_t local;      // index into the call's plan
  int32_t deps_left;  // transfers of the plan it still waits for
};
// Plans `call` into `run` (over all replicas' members for a group spanning replicas
// in a replica-symmetric Schedule: plan_replicated), reusing a shape of `shapes`
// or adding it, and appends its transfers to `xfers` (run.base is the first).
void begin_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t call, CallRun& run,
                std::vector<Xfer>& xfers, CallShapes& shapes);

// What both engines track beside the driver: op times (-1 until known), the
// collective calls in flight and their transfers.
struct RunState {
  explicit RunState(const schedule::RunPlan& p);
  OpTimes times;
  std::vector<CallRun> calls;
  std::vector<Xfer> xfers;
  CallShapes shapes;
};

}  // namespace rm::engine
