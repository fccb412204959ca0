#include "sim/engine/engine.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>

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

traces::Timeline simulate(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m,
                          EngineKind kind) {
  if (kind == EngineKind::analytic) return to_timeline(s, run_analytic(s, t, m), traces::Source::analytic);
  return to_timeline(s, run_simgrid(s, t, m), traces::Source::simgrid);
}

traces::Timeline to_timeline(const schedule::Schedule& s, const OpTimes& times, traces::Source source) {
  // Events are built directly in canonical order (rank, stream, start, end,
  // op; op ids are unique, so the name never decides): sorting small indices
  // is much cheaper than sorting events with their strings.
  struct Key {
    int rank, stream;
    double start, end;
    int64_t op;
    size_t index;
    bool operator<(const Key& o) const {
      return std::tie(rank, stream, start, end, op) < std::tie(o.rank, o.stream, o.start, o.end, o.op);
    }
  };
  const size_t n = s.ops.size();
  std::vector<Key> order;
  order.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    const schedule::Op& op = s.ops[k];
    const auto i = static_cast<size_t>(op.id);
    order.push_back({op.rank, op.stream, times.start[i], times.end[i], op.id, k});
  }
  std::sort(order.begin(), order.end());
  traces::Timeline tl;
  tl.source = source;
  tl.events.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const schedule::Op& op = s.ops[order[k].index];
    const auto i = static_cast<size_t>(op.id);
    traces::Event& e = tl.events[k];
    e.op = op.id;
    e.rank = op.rank;
    e.stream = op.stream;
    e.name = schedule::to_string(op.kind);
    e.category = e.name;
    e.start_s = times.start[i];
    e.end_s = times.end[i];
    e.layer = op.layer;
    e.phase = schedule::to_string(op.phase);
    e.step = op.step;
    e.bytes = op.bytes;
    e.flops = op.flops;
  }
  for (const schedule::Rank& r : s.ranks) {
    tl.rank_names[r.id] = fmt::format("rank {} (gpu {})", r.id, r.gpu);
    for (const schedule::Stream& st : r.streams) tl.stream_names[{r.id, st.id}] = st.name;
  }
  tl.metadata["generator"] = s.generator;
  tl.metadata["makespan_s"] = tl.makespan_s();
  return tl;
}

}  // namespace rm::engine
