#include "sim/engine/engine.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

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
                          const cost::CostModel& m, EngineKind kind, const std::vector<traces::Edge>* edges) {
  if (kind == EngineKind::analytic)
    return to_timeline(s, plan, run_analytic(s, plan, t, m), traces::Source::analytic, edges);
  return to_timeline(s, plan, run_simgrid(s, plan, t, m), traces::Source::simgrid, edges);
}

std::string event_name(const schedule::Op& op) {
  // Built in a stack buffer: this runs once per op of every simulated Timeline.
  char buf[64];
  const std::string_view kind = schedule::to_string(op.kind);
  char* p = std::copy(kind.begin(), kind.end(), buf);
  for (auto [tag, value] : {std::pair{'L', op.layer}, std::pair{'s', op.step}})
    if (value >= 0) {
      *p++ = ' ';
      *p++ = tag;
      p = std::to_chars(p, buf + sizeof buf, value).ptr;
    }
  return std::string(buf, p);
}

std::vector<traces::Edge> timeline_edges(const schedule::Schedule& s, const schedule::RunPlan& plan) {
  using traces::EdgeKind;
  const size_t n = s.ops.size();
  // One pass in id order (the Schedule's ops are large: read them once, in
  // order); per stream, where its current run [begin, end) and the previous
  // one [prev, begin) lie among its ops.
  struct Cursor {
    int32_t next = 0, prev = 0, begin = 0, end = 0;
  };
  std::vector<Cursor> at(plan.streams.size());
  std::vector<traces::Edge> edges;
  edges.reserve(n * 3);
  std::vector<schedule::OpId> seen(n, -1);  // per dep: the last op given an edge from it
  for (const schedule::Op& op : s.ops) {
    const auto k = static_cast<size_t>(plan.stream_of[static_cast<size_t>(op.id)]);
    const auto& ops = plan.streams[k];
    Cursor& c = at[k];
    if (c.next == c.end) c.prev = std::exchange(c.begin, c.end), c.end += plan.run_length[static_cast<size_t>(op.id)];
    ++c.next;
    for (int32_t j = c.begin; j < c.end; ++j) {
      const schedule::Op& member = ops[size_t(j)] == op.id ? op : s.ops[static_cast<size_t>(ops[size_t(j)])];
      for (schedule::OpId d : member.deps)
        if (d >= 0 && size_t(d) < n && std::exchange(seen[static_cast<size_t>(d)], op.id) != op.id)
          edges.push_back({d, op.id, EdgeKind::dependency});  // dangling deps: validate reports them
    }
    for (int32_t j = c.prev; j < c.begin; ++j) edges.push_back({ops[size_t(j)], op.id, EdgeKind::stream});
  }
  for (const schedule::Op& op : s.ops)
    if (op.kind == schedule::OpKind::send && plan.match.partner[static_cast<size_t>(op.id)] >= 0)
      edges.push_back({op.id, plan.match.partner[static_cast<size_t>(op.id)], EdgeKind::p2p});
  for (const auto& call : plan.match.calls) {
    schedule::OpId hub = -1;
    for (schedule::OpId m : call) {
      if (m < 0) continue;
      if (hub < 0) hub = m;
      else edges.push_back({hub, m, EdgeKind::collective});
    }
  }
  return edges;
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
      e.op = op.id;
      e.rank = op.rank;
      e.stream = op.stream;
      e.name = event_name(op);
      e.category = schedule::to_string(op.kind);
      e.start_s = key.start;
      e.end_s = key.end;
      e.layer = op.layer;
      e.phase = schedule::to_string(op.phase);
      e.step = op.step;
      e.bytes = op.bytes;
      e.flops = op.flops;
    }
  }
  for (const schedule::Rank& r : s.ranks) {
    tl.rank_names[r.id] = fmt::format("rank {} (gpu {})", r.id, r.gpu);
    for (const schedule::Stream& st : r.streams) tl.stream_names[{r.id, st.id}] = st.name;
  }
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
