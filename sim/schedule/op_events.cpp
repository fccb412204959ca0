#include "sim/schedule/op_events.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace rm::schedule {

std::string event_name(const Op& op) {
  // Built in a stack buffer: this runs once per op of every simulated Timeline.
  char buf[64];
  const std::string_view kind = to_string(op.kind);
  char* p = std::copy(kind.begin(), kind.end(), buf);
  for (auto [tag, value] : {std::pair{'L', int(op.layer)}, std::pair{'s', op.step}})
    if (value >= 0) {
      *p++ = ' ';
      *p++ = tag;
      p = std::to_chars(p, buf + sizeof buf, value).ptr;
    }
  return std::string(buf, p);
}

void fill_event(const Op& op, const OpDesc& d, traces::Event& e) {
  e.op = op.id;
  e.rank = op.rank;
  e.stream = op.stream;
  e.name = event_name(op);
  e.category = to_string(op.kind);
  e.layer = op.layer;
  e.phase = to_string(op.phase);
  e.step = op.step;
  e.bytes = d.bytes;
  e.flops = d.flops;
}

void name_ranks_and_streams(const Schedule& s, traces::Timeline& t) {
  for (const Rank& r : s.ranks) {
    t.rank_names[r.id] = fmt::format("rank {} (gpu {})", r.id, r.gpu);
    for (const Stream& st : r.streams) t.stream_names[{r.id, st.id}] = st.name;
  }
}

namespace {

// Every edge of timeline_edges, in its order, handed to emit(from, to, kind).
template <class Emit>
void for_each_edge(const Schedule& s, const RunPlan& plan, Emit&& emit) {
  using traces::EdgeKind;
  const size_t n = s.ops.size();
  // One pass in id order (the Schedule's ops are large: read them once, in
  // order); per stream, where its current run [begin, end) and the previous
  // one [prev, begin) lie among its ops.
  struct Cursor {
    int32_t next = 0, prev = 0, begin = 0, end = 0;
  };
  std::vector<Cursor> at(plan.streams.size());
  std::vector<OpId> seen(n, -1);  // per dep: the last op given an edge from it
  for (const Op& op : s.ops) {
    const auto k = static_cast<size_t>(plan.stream_of[static_cast<size_t>(op.id)]);
    const auto& ops = plan.streams[k];
    Cursor& c = at[k];
    if (c.next == c.end) c.prev = std::exchange(c.begin, c.end), c.end += plan.run_length[static_cast<size_t>(op.id)];
    ++c.next;
    for (int32_t j = c.begin; j < c.end; ++j) {
      const Op& member = ops[size_t(j)] == op.id ? op : s.ops[static_cast<size_t>(ops[size_t(j)])];
      for (OpId d : member.deps)
        if (d >= 0 && size_t(d) < n && std::exchange(seen[static_cast<size_t>(d)], op.id) != op.id)
          emit(d, op.id, EdgeKind::dependency);  // dangling deps: validate reports them
    }
    for (int32_t j = c.prev; j < c.begin; ++j) emit(ops[size_t(j)], op.id, EdgeKind::stream);
  }
  for (const Op& op : s.ops)
    if (op.kind == OpKind::send && plan.match.partner[static_cast<size_t>(op.id)] >= 0)
      emit(op.id, plan.match.partner[static_cast<size_t>(op.id)], EdgeKind::p2p);
  for (const auto& call : plan.match.calls) {
    OpId hub = -1;
    for (OpId m : call) {
      if (m < 0) continue;
      if (hub < 0) hub = m;
      else emit(hub, m, EdgeKind::collective);
    }
  }
}

}  // namespace

std::vector<traces::Edge> timeline_edges(const Schedule& s, const RunPlan& plan) {
  // Counted first, then filled: sized exactly, the array never grows by
  // doubling. On the default step its growth was the run's largest allocation
  // (85 MB while it grew); exactly sized, `simulate --stream off` peaks at 246 MB
  // of heap instead of 270 MB (heaptrack), for a second pass over the ops.
  size_t count = 0;
  for_each_edge(s, plan, [&](OpId, OpId, traces::EdgeKind) { ++count; });
  std::vector<traces::Edge> edges;
  edges.reserve(count);
  for_each_edge(s, plan, [&](OpId from, OpId to, traces::EdgeKind kind) { edges.push_back({from, to, kind}); });
  return edges;
}

}  // namespace rm::schedule
