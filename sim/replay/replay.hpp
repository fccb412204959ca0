// Trace-driven simulation (`ringmaster replay`): a Kineto import becomes a
// Schedule whose compute keeps the recorded durations, whose NCCL calls are
// re-simulated by an engine on a cluster, and whose CPU threads reproduce the
// recorded gaps (launch overhead, Python time) up to each recorded
// synchronisation; then every recorded ProfilerStep is timed again. Without a
// what-if (the cluster as given) a replay reproduces the recorded steps; with
// one (a faster NIC, another cluster) it predicts the change. How events map
// to ops and why: docs/replay.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"
#include "traces/kineto.hpp"

namespace rm::replay {

// Why an op of the replay Schedule exists.
enum class OpRole : uint8_t {
  gpu,         // a recorded GPU kernel, memcpy or memset (its recorded duration)
  gpu_gap,     // the recorded time between what a GPU event waited for and its start (launch latency)
  collective,  // a recorded NCCL kernel re-simulated as a Schedule collective or send/recv
  nccl_fixed,  // a recorded NCCL kernel kept at its recorded duration (see CallCounts)
  nccl_wait,   // the wait a recorded NCCL kernel spent on members that were not recorded
  ghost,       // a member of a call on a rank that was not recorded (always ready)
  host,        // a CPU thread's recorded time between two points (launches, syncs, steps)
  host_sync,   // a CPU synchronize: ends the recorded tail after the GPU event it waited for
};
std::string_view to_string(OpRole r);

// What happened to the recorded NCCL calls (a call: one collective's kernels
// across the recorded ranks).
struct CallCounts {
  int64_t resimulated = 0;       // every member recorded: the engine runs it on the cluster
  int64_t missing_members = 0;   // re-simulated, the unrecorded members' side from the recorded duration
  int64_t slower_than_recorded = 0;  // the cluster's transfer alone took longer than the recorded kernel
  // kept at the recorded duration, by reason ("no process group recorded", ...)
  std::map<std::string, int64_t> fixed;
  bool operator==(const CallCounts&) const = default;
};

// A recorded ProfilerStep (or the whole trace of a rank without one), as two
// points on a CPU thread of the replay Schedule.
struct StepPoints {
  int rank = 0;  // global rank
  std::string name;
  double recorded_start_s = 0, recorded_end_s = 0;
  schedule::OpId start_op = -1, end_op = -1;  // host ops ending at the points; -1: time 0
  bool whole_trace = false;  // no ProfilerStep: the rank's whole span (end_op unused, ops below)
  // The GPU events launched inside the step (their op ids), for the GPU span.
  std::vector<schedule::OpId> gpu_ops;
};

// The replay Schedule with everything needed to run it and read it back.
struct ReplayPlan {
  schedule::Schedule schedule;
  engine::FixedDurations fixed_s;     // per op: its seconds, -1 for communication
  std::vector<OpRole> role;           // per op
  std::vector<int64_t> event;         // per op: the recorded event's op id, -1 for none
  // per op: when it ran in the recording (a gap or wait: the interval it stands
  // for); -1 for ghosts. A replay without a what-if reproduces these.
  std::vector<double> recorded_start, recorded_end;
  std::vector<int> global_rank;       // per Schedule rank: its rank in the job
  std::vector<bool> ghost;            // per Schedule rank: not recorded
  std::vector<StepPoints> steps;      // by rank, then start
  std::vector<int> missing_ranks;     // members of re-simulated calls that were not recorded
  CallCounts calls;
  int64_t early_starts = 0;           // GPU events recorded before what they waited for ended
  double early_max_s = 0;             // by at most this much (kept at 0 gap)
  std::vector<std::string> notes;     // what a reader of the result must know
};

// Builds the replay of `imp`. Recorded rank r runs on GPU r of `base`'s
// topology (ranks that appear only in a collective's group too). `base` is the
// cluster the trace was recorded on, as well as it is known: it prices the
// unrecorded members' side of a call (their arrival is placed where the
// recorded kernel's duration implies, given what the transfer costs on
// `base`). Throws std::runtime_error (one line) when a rank needs a GPU the
// cluster does not have.
ReplayPlan build_replay(const traces::KinetoImport& imp, const topology::Topology& base,
                        const cost::CostModel& base_model);

struct StepResult {
  std::string name;
  double recorded_s = 0, replayed_s = 0;
  double gpu_recorded_s = 0, gpu_replayed_s = 0;  // first start to last end of the GPU events it launched; 0: none
  double nccl_recorded_s = 0, nccl_replayed_s = 0;  // the NCCL kernels it launched, summed (waits on peers included)
  bool whole_trace = false;
};
struct RankResult {
  int rank = 0;
  std::vector<StepResult> steps;
};
struct ReplayResult {
  std::vector<RankResult> ranks;
  engine::OpTimes times;  // of plan.schedule's ops
};

// A cluster's cost model for a replay: its compute ops all keep recorded
// durations, so no attention kernel table is needed.
cost::CostModel replay_cost_model(const Cluster& c);

// Runs `plan` on the what-if cluster (topology + cost model) with `engine`.
ReplayResult run_replay(const ReplayPlan& plan, const topology::Topology& t, const cost::CostModel& m,
                        engine::EngineKind engine);

// The replayed GPU events as a Timeline (source: the engine's), each under its
// recorded rank, stream, name and op id so it joins the import on op ids and
// opens in Perfetto next to it; an NCCL kernel spans its wait on unrecorded
// members too, as the recorded kernel did. Edges: the import's between events
// it keeps. metadata: "replay_of" (the import's files).
traces::Timeline replayed_timeline(const traces::KinetoImport& imp, const ReplayPlan& plan, const ReplayResult& res,
                                   traces::Source source);

}  // namespace rm::replay
