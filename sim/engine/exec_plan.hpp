// What both engines precompute from a Schedule before running it: each
// stream's ops in id order with its runs (an op and the p2p ops joined to it),
// the reverse dependency lists, communication matching, each op's compute
// seconds and each collective call's member ranks. Keeps the two engines'
// reading of the Schedule identical.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::engine {

struct ExecPlan {
  schedule::CommMatching match;
  std::vector<std::vector<schedule::OpId>> streams;  // per stream: its ops, id order
  std::vector<int32_t> stream_of;                    // per op: index into streams
  std::vector<int32_t> run_length;                   // per op: ops in the run it heads (0: not a head)
  std::vector<int64_t> dependents_begin;             // CSR of dependents, size ops + 1
  std::vector<schedule::OpId> dependents;
  std::vector<double> compute_s;                     // per op: CostModel::compute_seconds; 0 for comm
  std::vector<int32_t> member_of;                    // per op: its index in its collective call; -1
  std::vector<int> gpu_of_rank;
};

ExecPlan make_exec_plan(const schedule::Schedule& s, const cost::CostModel& m);

// The collective's transfer plan for `call` (root resolved from the broadcast
// op's peer).
std::vector<cost::PlannedTransfer> plan_call(const schedule::Schedule& s, const ExecPlan& p, int64_t call);

// A collective call in flight, as both engines run it: its transfer plan, the
// transfers waiting on each transfer (CSR), and how many transfers still touch
// each member (a member's op ends with its last one).
struct CallRun {
  std::vector<cost::PlannedTransfer> plan;
  std::vector<int32_t> dependents_begin, dependents;
  std::vector<int32_t> member_left;
  int64_t base = 0;  // its transfers in the engine's transfer list from here
};
// One planned transfer of a call, as the engines queue it.
struct Xfer {
  int64_t call;
  int32_t local;      // index into the call's plan
  int32_t deps_left;  // transfers of the plan it still waits for
};
// Plans `call` into `run` and appends its transfers to `xfers` (run.base is the first).
void begin_call(const schedule::Schedule& s, const ExecPlan& p, int64_t call, CallRun& run, std::vector<Xfer>& xfers);

// What both engines track while they run a plan: op times (-1 until known),
// dependencies still open per op, each stream's next run and the ops of its
// current run still to end, members arrived per collective call, the calls
// in flight and their transfers.
struct RunState {
  RunState(const schedule::Schedule& s, const ExecPlan& p);
  OpTimes times;
  std::vector<int32_t> deps_left;
  std::vector<size_t> head, run_left;
  std::vector<size_t> arrived;
  std::vector<CallRun> calls;
  std::vector<Xfer> xfers;
};

// Throws ScheduleError naming the first op that never ended (end < 0).
void check_all_ended(const schedule::Schedule& s, const std::vector<double>& end);

}  // namespace rm::engine
