// The critical path of a Timeline: a walk of its typed edges (traces::Edge)
// back from the op that ends last, through the ends that each gated the next
// start, and where its time went (compute, communication, waiting; per op kind).
#pragma once

#include <vector>

#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::report {

struct CriticalPathShare {
  schedule::OpKind kind = schedule::OpKind::gemm;
  schedule::Phase phase = schedule::Phase::forward;
  double seconds = 0;
  int ops = 0;
};

// Walked back from the op that ends last: at each op, the latest-ending of
// what its start waited for — the sources of its dependency and stream edges —
// and for a p2p or collective op the same of its partner or of the call's
// other members (the transfer starts once all are posted).
struct CriticalPath {
  double length_s = 0;              // end of the last op - start of the first op of the path
  std::vector<schedule::OpId> ops;  // first to last in time, with the partners the path went through
  double compute_s = 0;             // time on compute ops
  double communication_s = 0;       // time on communication ops
  double waiting_s = 0;             // gaps: an op started after all it waited for had ended
  std::vector<CriticalPathShare> by_kind;  // seconds per (kind, phase), largest first
};

// s gives each op's kind and phase; tl's events and edges give the graph
// (engine::to_timeline fills both). Ops without an event are skipped.
CriticalPath critical_path(const schedule::Schedule& s, const traces::Timeline& tl);

}  // namespace rm::report
