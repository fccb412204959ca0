#include "sim/engine/engine.hpp"

#include <fmt/format.h>

#include "sim/engine/analytic.hpp"
#include "sim/engine/simgrid_engine.hpp"

namespace rm::engine {

std::string_view to_string(EngineKind k) { return k == EngineKind::analytic ? "analytic" : "simgrid"; }

std::optional<EngineKind> parse_engine_kind(std::string_view s) {
  if (s == "analytic") return EngineKind::analytic;
  if (s == "simgrid") return EngineKind::simgrid;
  return std::nullopt;
}

traces::Timeline simulate(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m,
                          EngineKind kind) {
  if (kind == EngineKind::analytic) return to_timeline(s, run_analytic(s, t, m), traces::Source::analytic);
  return to_timeline(s, run_simgrid(s, t, m), traces::Source::simgrid);
}

traces::Timeline to_timeline(const schedule::Schedule& s, const OpTimes& times, traces::Source source) {
  traces::Timeline tl;
  tl.source = source;
  tl.events.reserve(s.ops.size());
  for (const schedule::Op& op : s.ops) {
    const auto i = static_cast<size_t>(op.id);
    traces::Event e;
    e.op = op.id;
    e.rank = op.rank;
    e.stream = op.stream;
    e.name = std::string(schedule::to_string(op.kind));
    e.category = e.name;
    e.start_s = times.start[i];
    e.end_s = times.end[i];
    e.layer = op.layer;
    e.phase = std::string(schedule::to_string(op.phase));
    e.step = op.step;
    e.bytes = op.bytes;
    e.flops = op.flops;
    tl.events.push_back(std::move(e));
  }
  for (const schedule::Rank& r : s.ranks) {
    tl.rank_names[r.id] = fmt::format("rank {} (gpu {})", r.id, r.gpu);
    for (const schedule::Stream& st : r.streams) tl.stream_names[{r.id, st.id}] = st.name;
  }
  tl.sort();
  tl.metadata["generator"] = s.generator;
  tl.metadata["makespan_s"] = tl.makespan_s();
  return tl;
}

}  // namespace rm::engine
