// The critical path of a Timeline: a walk of its typed edges (traces::Edge)
// back from the op that ends last, through the ends that each gated the next
// start, and where its time went (compute, communication, waiting; per op kind).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "sim/report/op_spans.hpp"
#include "sim/schedule/op_events.hpp"
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

// A Timeline's edges indexed by op: what each op waited for (dependency
// edges, then stream edges, each in the edges' order) and its partners. It
// depends on the edges only, so a caller that reports one Schedule many times
// (a sweep's cluster what-ifs) builds it once.
class EdgeGraph {
 public:
  EdgeGraph(const std::vector<traces::Edge>& edges, size_t ops);

  // What op's start waited for, in order.
  template <class F>
  void waits(schedule::OpId op, F&& f) const {
    for (size_t i = begin_[size_t(op)]; i < begin_[size_t(op) + 1]; ++i) f(waits_[i]);
  }
  // The ops whose posting a transfer of `op` also waited for: its p2p partner,
  // or the other members of its collective call in member order.
  std::vector<schedule::OpId> partners(schedule::OpId op) const;

 private:
  std::vector<size_t> begin_;
  std::vector<schedule::OpId> waits_, partner_, hub_;
  std::map<schedule::OpId, std::vector<schedule::OpId>> members_;  // per call's first member: the others
};

// s gives each op's kind and phase; tl's events and edges give the graph
// (engine::to_timeline fills both). Ops without an event are skipped.
CriticalPath critical_path(const schedule::Schedule& s, const traces::Timeline& tl);
// The same on op times and a graph already built (what the Timeline form runs).
CriticalPath critical_path(const schedule::Schedule& s, const EdgeGraph& g, const OpSpans& t);
// The walk alone: the path as a chain, last op first (schedule/op_events.hpp).
std::vector<schedule::PathLink> critical_chain(const schedule::Schedule& s, const EdgeGraph& g, const OpSpans& t);
// Where a chain's time went (what the forms above return): each op's seconds
// run from the later of its start and its next link's end up to where the
// path had reached; a start after that end is waiting.
CriticalPath critical_path(const std::vector<schedule::PathLink>& chain);

}  // namespace rm::report
