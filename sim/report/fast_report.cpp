#include "sim/report/fast_report.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace rm::report {

ReportPrep::ReportPrep(const Experiment& e, const schedule::Schedule& s, const schedule::RunPlan& plan,
                       const std::vector<traces::Edge>& edges)
    : sums(step_sums(e, s)), graph(edges, s.ops.size()), flows(core::flow_plan(s, plan.match)) {
  stream_rank.reserve(plan.streams.size());
  stream_kind.reserve(plan.streams.size());
  for (size_t k = 0; k < plan.streams.size(); ++k) {
    const schedule::Op& first = s.ops[size_t(plan.streams[k][0])];
    const schedule::Stream* st = s.find_stream(first.rank, first.stream);
    stream_rank.push_back(first.rank);
    stream_kind.push_back(!st ? -1 : st->kind == schedule::StreamKind::compute ? 1 : 0);
  }
  phase.reserve(s.ops.size());
  for (const schedule::Op& op : s.ops) phase.push_back(op.phase);
}

StepReport fast_step_report(const Experiment& e, const schedule::Schedule& s, const schedule::RunPlan& plan,
                            const ReportPrep& prep, const OpSpans& times, const topology::Topology& t,
                            const cost::CostModel& m, bool with_bound_by, TimedParts* keep, bool same_times) {
  if (keep && same_times && keep->valid && (!with_bound_by || (keep->has_traffic && core::same_routes(keep->traffic, t)))) {
    StepReport r = keep->report;
    core::fill_totals(r, e, s, prep.sums, times, r.step_time_s);  // the experiment's own figures (memory, MFU)
    if (with_bound_by)
      r.bound_by = core::bound_by(keep->traffic, t, m, r.critical_path, r.step_time_s, r.imbalance.step_measured);
    return r;
  }
  if (keep) keep->valid = false;
  const size_t n = s.ops.size(), R = s.ranks.size();
  // The makespan as Timeline::makespan_s reads it off one event per op.
  double begin = n ? times.start[0] : 0.0, end = n ? times.end[0] : 0.0;
  for (size_t i = 0; i < n; ++i) begin = std::min(begin, times.start[i]), end = std::max(end, times.end[i]);
  StepReport r;
  core::fill_totals(r, e, s, prep.sums, times, end - begin);

  // One pass over the streams: the breakdown's per-rank intervals and bound-by's per phase.
  std::vector<std::vector<core::Interval>> compute(R), any(R);
  core::PhaseIntervals iv(with_bound_by ? R : 0);
  // Each stream's ops in (start, end, id) order, as engine::to_timeline lays
  // out its events: a stream runs its ops in id order, so only ops launched
  // together may need reordering. Every per-rank list is then a few sorted
  // runs, which core::sort_intervals merges in linear time.
  struct Key {
    double start, end;
    schedule::OpId op;
    bool operator<(const Key& o) const { return std::tie(start, end, op) < std::tie(o.start, o.end, o.op); }
  };
  std::vector<Key> keys;
  for (size_t k = 0; k < plan.streams.size(); ++k) {
    if (prep.stream_kind[k] < 0) continue;  // a stream the Schedule does not declare: no event on it counts
    const bool is_compute = prep.stream_kind[k] == 1;
    const size_t rank = size_t(prep.stream_rank[k]);
    keys.clear();
    for (schedule::OpId id : plan.streams[k]) keys.push_back({times.start[size_t(id)], times.end[size_t(id)], id});
    if (!std::is_sorted(keys.begin(), keys.end())) std::sort(keys.begin(), keys.end());
    for (const Key& key : keys) {
      const schedule::OpId id = key.op;
      const core::Interval x{key.start, key.end};
      any[rank].push_back(x);
      if (is_compute) compute[rank].push_back(x);
      if (!with_bound_by) continue;
      const size_t p = size_t(prep.phase[size_t(id)]);
      iv.seen[p] = true;
      if (is_compute) {
        iv.phase_compute[rank][p].push_back(x);
      } else {
        iv.phase_comm[rank][p].push_back(x);
      }
    }
  }
  r.breakdown = core::breakdown(compute, any, r.step_time_s);
  // Bound-by's per-rank compute intervals are the breakdown's (sorted by it now: the union is the same).
  if (with_bound_by) iv.compute = std::move(compute);
  r.critical_path = critical_path(s, prep.graph, times);
  core::LinkTraffic traffic;
  if (with_bound_by) {
    traffic = core::link_traffic(s, prep.flows, times, iv, t, r.critical_path);
    r.bound_by = core::bound_by(traffic, t, m, r.critical_path, r.step_time_s, r.imbalance.step_measured);
  }
  if (keep) {
    keep->report = r;
    keep->report.bound_by = {};
    keep->traffic = std::move(traffic);
    keep->has_traffic = with_bound_by;
    keep->valid = true;
  }
  return r;
}

}  // namespace rm::report
