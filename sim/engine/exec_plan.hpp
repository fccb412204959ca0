// What both engines add to the run driver's plan (schedule::RunPlan): each
// op's compute seconds, each rank's GPU, and the collective calls in flight as
// the CostModel's transfer plans. The driver decides what starts when; this is
// how long it takes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "sim/cost/collective_plan.hpp"
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
// A collective call in flight, as both engines run it: its shape, how many
// transfers still touch each member (a member's op ends with its last one) and
// how many plan transfers each transfer still waits for. Held only while the
// call runs: its last transfer releases it (a world all-reduce under the
// data-parallel shortcut plans ~1M transfers, and a step runs hundreds of calls).
struct CallRun {
  std::shared_ptr<const CallShape> shape;
  std::vector<int32_t> member_left;
  std::vector<int32_t> deps_left;  // per transfer of the plan
  int64_t xfers_left = 0;          // transfers not yet ended
  // A call over a group spanning replicas (symmetry.hpp): its members in replica 0;
  // plan members are then full member indices, member m standing for slot(m) of
  // replica m / fold. 0: an ordinary call.
  int32_t fold = 0;
  int slot(int m) const { return fold > 0 ? m % fold : m; }
  const std::vector<cost::PlannedTransfer>& plan() const { return shape->plan; }
  // Transfer `local` has ended: start(d) for each plan transfer d it was the last
  // dependency of, in the plan's order.
  template <class Start>
  void release_dependents(int32_t local, Start&& start) {
    const CallShape& sh = *shape;
    for (int32_t i = sh.dependents_begin[static_cast<size_t>(local)]; i < sh.dependents_begin[static_cast<size_t>(local) + 1]; ++i) {
      const int32_t d = sh.dependents[static_cast<size_t>(i)];
      if (--deps_left[static_cast<size_t>(d)] == 0) start(d);
    }
  }
  // Counts the end of one transfer; the call's last frees what the call held
  // (its plan is not read again).
  void end_xfer() {
    if (--xfers_left > 0) return;
    shape.reset();
    std::vector<int32_t>().swap(member_left);
    std::vector<int32_t>().swap(deps_left);
  }
};
// The shapes planned so far in one run.
using CallShapes = std::map<schedule::CallShapeKey, std::shared_ptr<const CallShape>>;
// A planned transfer as the engines' events name it: its call and its index in
// the call's plan.
inline int64_t xfer_id(int64_t call, int32_t local) { return call << 32 | int64_t(uint32_t(local)); }
inline int64_t xfer_call(int64_t x) { return x >> 32; }
inline int32_t xfer_local(int64_t x) { return int32_t(uint32_t(x)); }
// Plans `call` into `run` (over all replicas' members for a group spanning replicas
// in a replica-symmetric Schedule: cost::plan_collective), reusing a shape of `shapes`
// or adding it.
void begin_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t call, CallRun& run, CallShapes& shapes);
// The same from the call's shape key (schedule::call_shape_key), for a run that holds no RunPlan.
void begin_call(const schedule::CallShapeKey& k, CallRun& run, CallShapes& shapes);

// What both engines track beside the driver: op times (-1 until known) and the
// collective calls (in flight, or done and released).
struct RunState {
  explicit RunState(const schedule::RunPlan& p);
  OpTimes times;
  std::vector<CallRun> calls;
  CallShapes shapes;
};

}  // namespace rm::engine
