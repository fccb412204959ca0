// How a Schedule's ops appear in a Timeline, defined once for the engines'
// predicted Timelines and the runtime's measured ones, so the two look alike
// and join op by op: each op's event fields, the rank and stream names, and
// the run graph's typed edges (what each op's start waited for).
#pragma once

#include <string>
#include <vector>

#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::schedule {

// "attn_fwd L3 s2": the op kind, then layer and ring step when >= 0.
std::string event_name(const Op& op);

// Every field of op's event but the times: op id, rank, stream, name
// (event_name), category = kind, layer, phase, step, bytes, flops.
void fill_event(const Op& op, const OpDesc& d, traces::Event& e);  // d: the op's entry

// Rank names "rank R (gpu G)" and the Schedule's stream names.
void name_ranks_and_streams(const Schedule& s, traces::Timeline& t);

// What each op's start waited for under the run driver, as typed edges between
// op ids (traces/timeline.hpp defines the kinds):
//   dependency  d -> x for each dep d of x's run (x's own deps and those of the
//               ops joined with it: the run launches when all have ended),
//               in listed order, each once;
//   stream      every op of the previous run on x's stream -> x;
//   p2p         send -> recv of each matched pair;
//   collective  the call's first member -> each other member (member order).
// Per op x: its dependency edges, then its stream edges; then every p2p edge,
// then every collective edge.
std::vector<traces::Edge> timeline_edges(const Schedule& s, const RunPlan& plan);

// One op of a critical path held as a chain, from the op that ends last back
// to the first: the next link is what this op's start waited for last, and
// `via` says whose wait it was (this op's own, or a p2p partner's or a call
// member's, whose posting the transfer also waited for). The report's walk of
// a Timeline (report/critical_path.hpp) and the streamed run
// (engine/stream_run.hpp) both build one; the report reads its time off it.
struct PathLink {
  OpId op = -1;
  double start = 0, end = 0;
  OpKind kind = OpKind::gemm;
  Phase phase = Phase::forward;
  OpId via = -1;  // -1: op's own wait (or the last link)
  OpKind via_kind = OpKind::gemm;
  Phase via_phase = Phase::forward;
  bool operator==(const PathLink&) const = default;
};

// What a streamed run's critical path tells the report of a p2p op on it (the
// whole run's report reads it off the Schedule): its pair's transfer, from
// src_rank to dst_rank over [start, the link's end], both ends of a pair
// ending together. src_rank -1: not a p2p op, or a transfer of no bytes.
struct PathTransfer {
  double start = 0;
  int32_t src_rank = -1, dst_rank = -1;
  bool operator==(const PathTransfer&) const = default;
};

}  // namespace rm::schedule
