#include "sim/engine/engine.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>


#include "sim/config/enum_names.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/simgrid_engine.hpp"

namespace rm::engine {

namespace {
const EnumName<EngineKind> kEngineKinds[] = {{EngineKind::analytic, "analytic"}, {EngineKind::simgrid, "simgrid"}};
}  // namespace

std::string_view to_string(EngineKind k) { return name_of(kEngineKinds, k); }
std::optional<EngineKind> parse_engine_kind(std::string_view s) { return value_of(kEngineKinds, s); }

traces::Timeline simulate(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m,
                          EngineKind kind) {
  return simulate(s, schedule::RunPlan(s), t, m, kind);
}

traces::Timeline simulate(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                          const cost::CostModel& m, EngineKind kind, const std::vector<traces::Edge>* edges,
                          const FixedDurations* fixed_compute_s) {
  if (kind == EngineKind::analytic)
    return to_timeline(s, plan, run_analytic(s, plan, t, m, fixed_compute_s), traces::Source::analytic, edges);
  return to_timeline(s, plan, run_simgrid(s, plan, t, m, fixed_compute_s), traces::Source::simgrid, edges);
}

traces::Timeline to_timeline(const schedule::Schedule& s, const OpTimes& times, traces::Source source) {
  return to_timeline(s, schedule::RunPlan(s), times, source);
}

traces::Timeline to_timeline(const schedule::Schedule& s, const schedule::RunPlan& plan, const OpTimes& times,
                             traces::Source source, const std::vector<traces::Edge>* edges) {
  // Events are built directly in canonical order (rank, stream, start, end,
  // op; op ids are unique, so the name never decides) stream by stream, with
  // no global sort: a stream runs its ops in id order, so their starts already
  // ascend, and only ops launched together (equal starts) may need reordering
  // by end; each stream is checked and sorted alone only if it is not in order.
  struct Key {
    double start, end;
    int64_t op;
    bool operator<(const Key& o) const { return std::tie(start, end, op) < std::tie(o.start, o.end, o.op); }
  };
  const size_t n = s.ops.size();
  std::vector<int32_t> stream_order(plan.streams.size());  // streams by (rank, stream)
  for (size_t k = 0; k < stream_order.size(); ++k) stream_order[k] = static_cast<int32_t>(k);
  auto stream_key = [&](int32_t k) {
    const schedule::Op& first = s.ops[static_cast<size_t>(plan.streams[size_t(k)][0])];
    return std::pair{first.rank, first.stream};
  };
  std::sort(stream_order.begin(), stream_order.end(),
            [&](int32_t a, int32_t b) { return stream_key(a) < stream_key(b); });
  // The events are appended in that order (written once, front to back; each
  // op and its times are read where they lie).
  traces::Timeline tl;
  tl.source = source;
  tl.events.reserve(n);
  std::vector<Key> keys;
  for (int32_t st : stream_order) {
    const auto ops = plan.streams[size_t(st)];
    keys.clear();
    for (schedule::OpId id : ops) keys.push_back({times.start[size_t(id)], times.end[size_t(id)], id});
    if (!std::is_sorted(keys.begin(), keys.end())) std::sort(keys.begin(), keys.end());
    for (const Key& key : keys) {
      const schedule::Op& op = s.ops[static_cast<size_t>(key.op)];
      traces::Event& e = tl.events.emplace_back();
      schedule::fill_event(op, s.desc(op), e);
      e.start_s = key.start;
      e.end_s = key.end;
    }
  }
  schedule::name_ranks_and_streams(s, tl);
  tl.edges = edges ? *edges : timeline_edges(s, plan);
  tl.metadata["generator"] = s.generator;
  // Timeline::makespan_s over the events, read from the packed times instead
  // (one event per op, with the op's times).
  double begin = n ? times.start[0] : 0.0, end = n ? times.end[0] : 0.0;
  for (size_t i = 0; i < n; ++i) begin = std::min(begin, times.start[i]), end = std::max(end, times.end[i]);
  tl.metadata["makespan_s"] = end - begin;
  return tl;
}

}  // namespace rm::engine
