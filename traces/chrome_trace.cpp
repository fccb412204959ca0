#include "traces/chrome_trace.hpp"

#include <cmath>
#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>
#include <unordered_map>
#include <set>

#include <fmt/format.h>

#include "traces/json_text.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {

namespace {

constexpr std::string_view kFormat = "ringmaster.timeline";
constexpr int kVersion = 1;

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        else
          out.push_back(c);
    }
  }
  out.push_back('"');
}

// Names a process (rank) or thread (stream) and fixes its position in the UI.
void append_meta(std::string& out, std::string_view what, int pid, int tid, std::string_view name, int sort_index) {
  fmt::format_to(std::back_inserter(out), "{{\"ph\":\"M\",\"name\":\"{}_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                 what, pid, tid);
  append_json_string(out, name);
  out += "}},\n";
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"M\",\"name\":\"{}_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}},\n",
                 what, pid, tid, sort_index);
}

void append_event(std::string& out, const Event& e, size_t index) {
  if (!std::isfinite(e.start_s) || !std::isfinite(e.end_s) || e.end_s < e.start_s)
    throw TraceError(fmt::format("event {} (op {}, rank {}): times must be finite with end >= start, got [{}, {}]",
                                 index, e.op, e.rank, e.start_s, e.end_s));
  if (e.samples < 0 || !std::isfinite(e.spread_s) || e.spread_s < 0 || (e.samples == 0 && e.spread_s != 0))
    throw TraceError(fmt::format("event {} (op {}, rank {}): samples must be >= 0 and spread_s finite, >= 0 and 0 "
                                 "without samples, got samples {} spread_s {}",
                                 index, e.op, e.rank, e.samples, e.spread_s));
  double ts = e.start_s * 1e6;
  double dur = e.end_s * 1e6 - ts;  // reader takes end = (ts + dur) / 1e6
  out += "{\"ph\":\"X\",\"name\":";
  append_json_string(out, e.name);
  out += ",\"cat\":";
  append_json_string(out, e.category);
  fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{", e.rank, e.stream,
                 ts, dur);
  std::string_view sep = "";
  auto field = [&](std::string_view key) {
    fmt::format_to(std::back_inserter(out), "{}\"{}\":", sep, key);
    sep = ",";
  };
  if (e.op >= 0) field("op"), fmt::format_to(std::back_inserter(out), "{}", e.op);
  if (e.layer >= 0) field("layer"), fmt::format_to(std::back_inserter(out), "{}", e.layer);
  if (!e.phase.empty()) field("phase"), append_json_string(out, e.phase);
  if (e.step >= 0) field("step"), fmt::format_to(std::back_inserter(out), "{}", e.step);
  if (e.bytes != 0) field("bytes"), fmt::format_to(std::back_inserter(out), "{}", e.bytes);
  if (e.flops != 0) field("flops"), fmt::format_to(std::back_inserter(out), "{}", e.flops);
  if (e.samples > 0) {  // a repeated measurement (predicted Timelines never are: their bytes do not change)
    field("samples"), fmt::format_to(std::back_inserter(out), "{}", e.samples);
    field("spread_us"), fmt::format_to(std::back_inserter(out), "{}", e.spread_s * 1e6);
  }
  out += "}},\n";
}

// Perfetto draws an arrow from the send's slice to the recv's: flow events
// bound to the enclosing slice, placed mid-slice so binding cannot miss.
void append_flows(std::string& out, const std::vector<Event>& events, const std::vector<Edge>& edges) {
  if (std::none_of(edges.begin(), edges.end(), [](const Edge& e) { return e.kind == EdgeKind::p2p; })) return;
  std::unordered_map<int64_t, const Event*> by_op;
  for (const auto& e : events)
    if (e.op >= 0) by_op.try_emplace(e.op, &e);
  int64_t id = 0;
  for (const Edge& edge : edges) {
    if (edge.kind != EdgeKind::p2p) continue;
    auto from = by_op.find(edge.from), to = by_op.find(edge.to);
    if (from == by_op.end() || to == by_op.end() || edge.from == edge.to) continue;
    ++id;
    for (const Event* e : {from->second, to->second})
      fmt::format_to(std::back_inserter(out),
                     "{{\"ph\":\"{}\",{}\"id\":{},\"name\":\"p2p\",\"cat\":\"p2p\",\"pid\":{},\"tid\":{},\"ts\":{}}},\n",
                     e == from->second ? "s" : "f", e == from->second ? "" : "\"bp\":\"e\",", id, e->rank, e->stream,
                     (e->start_s + e->end_s) * 0.5e6);
  }
}

void append_edges(std::string& out, const std::vector<Edge>& edges) {
  out += ",\"edges\":[";
  for (size_t i = 0; i < edges.size(); ++i)
    fmt::format_to(std::back_inserter(out), "{}[{},{},\"{}\"]", i ? "," : "", edges[i].from, edges[i].to,
                   to_string(edges[i].kind));
  out += "]";
}

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinI64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMinInt = std::numeric_limits<int>::min();
// The largest |ts| and dur read, in microseconds (~31,700 years): room for
// clocks since the epoch, and ts + dur stays finite and exact enough to write back.
constexpr double kMaxTimeUs = 1e18;

// The integer `v` holds when it is one in [min, max]: checked before narrowing
// (a pid of 2^32 is no rank 0, a tid of 2^64-1 no -1, an op of 6.7e19 no integer).
std::optional<int64_t> integer_in(const nlohmann::json& v, int64_t min, int64_t max) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return std::nullopt;
  const auto i = v.get<int64_t>();
  if (i < min || i > max) return std::nullopt;
  return i;
}

std::vector<Edge> read_edges(const nlohmann::json& edges, const std::string& name) {
  if (!edges.is_array()) throw TraceError(fmt::format("{}: otherData.edges must be an array", name));
  std::vector<Edge> out;
  out.reserve(edges.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    const auto& e = edges[i];
    std::optional<EdgeKind> kind;
    if (e.is_array() && e.size() == 3 && integer_in(e[0], kMinI64, kMaxI64) && integer_in(e[1], kMinI64, kMaxI64) &&
        e[2].is_string())
      kind = parse_edge_kind(e[2].get<std::string>());
    if (!kind)
      throw TraceError(fmt::format("{}: otherData.edges[{}]: expected [from op, to op, kind] with kind one of stream, "
                                   "dependency, p2p, collective; got {}",
                                   name, i, e.dump()));
    out.push_back({e[0].get<int64_t>(), e[1].get<int64_t>(), *kind});
  }
  return out;
}

int int_field(const nlohmann::json& ev, const char* key, size_t index, const std::string& name) {
  auto it = ev.find(key);
  const auto v = it == ev.end() ? std::nullopt : integer_in(*it, kMinInt, kMaxInt);
  if (!v)
    throw TraceError(fmt::format("{}: traceEvents[{}]: \"{}\" must be an integer in [{}, {}]{}", name, index, key,
                                 kMinInt, kMaxInt, it == ev.end() ? "" : ", got " + it->dump()));
  return static_cast<int>(*v);
}

// A time in microseconds: finite, |value| <= kMaxTimeUs, and >= 0 when `non_negative` (a duration).
double time_field(const nlohmann::json& ev, const char* key, bool non_negative, size_t index, const std::string& name) {
  auto it = ev.find(key);
  const double v = it != ev.end() && it->is_number() ? it->get<double>() : std::nan("");
  if (!(std::fabs(v) <= kMaxTimeUs) || (non_negative && v < 0))
    throw TraceError(fmt::format("{}: traceEvents[{}]: \"{}\" must be a number in [{}, {:g}] (microseconds){}", name,
                                 index, key, non_negative ? "0" : "-1e+18", kMaxTimeUs,
                                 it == ev.end() ? "" : ", got " + it->dump()));
  return v;
}

// An optional integer argument in [min, max] (what the writer writes back).
int64_t int_arg(const nlohmann::json& args, const char* key, int64_t fallback, int64_t min, int64_t max, size_t index,
                const std::string& name) {
  auto it = args.find(key);
  if (it == args.end()) return fallback;
  const auto v = integer_in(*it, min, max);
  if (!v)
    throw TraceError(fmt::format("{}: traceEvents[{}]: args.{} has the wrong type or range: expected an integer in "
                                 "[{}, {}], got {}",
                                 name, index, key, min, max, it->dump()));
  return *v;
}

// An optional finite number argument (>= 0 when `non_negative`).
double number_arg(const nlohmann::json& args, const char* key, bool non_negative, size_t index,
                  const std::string& name) {
  auto it = args.find(key);
  if (it == args.end()) return 0.0;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || (non_negative && it->get<double>() < 0))
    throw TraceError(fmt::format("{}: traceEvents[{}]: args.{} has the wrong type or range: expected a finite number{}, "
                                 "got {}",
                                 name, index, key, non_negative ? " >= 0" : "", it->dump()));
  return it->get<double>();
}

// An optional string of an event (`prefix` "") or of its args ("args.").
std::string string_field(const nlohmann::json& obj, const char* key, std::string_view prefix, size_t index,
                         const std::string& name) {
  auto it = obj.find(key);
  if (it == obj.end()) return "";
  if (!it->is_string())
    throw TraceError(fmt::format("{}: traceEvents[{}]: {}{} must be a string, got {}", name, index, prefix, key,
                                 it->dump()));
  return it->get<std::string>();
}

Source read_source(const nlohmann::json& root, const std::string& name) {
  if (!root.is_object() || !root.contains("otherData")) {
    // Kineto (PyTorch profiler) traces carry no otherData block but these keys.
    if (root.is_object() && (root.contains("deviceProperties") || root.contains("distributedInfo")))
      return Source::kineto;
    throw TraceError(fmt::format("{}: no otherData block naming the source", name));
  }
  const auto od = root.find("otherData");
  if (!od->is_object()) throw TraceError(fmt::format("{}: otherData must be an object", name));
  if (od->contains("format") && od->at("format") != kFormat)
    throw TraceError(fmt::format("{}: otherData.format is {}, expected \"{}\"", name, od->at("format").dump(), kFormat));
  if (od->contains("version") && od->at("version") != kVersion)
    throw TraceError(fmt::format("{}: unsupported timeline version {} (this build reads {})", name,
                                 od->at("version").dump(), kVersion));
  auto src = od->find("source");
  std::optional<Source> s;
  if (src != od->end() && src->is_string()) s = parse_source(src->get<std::string>());
  if (!s)
    throw TraceError(fmt::format("{}: otherData.source must be one of analytic, simgrid, runtime-cpu, runtime-cuda, "
                                 "kineto",
                                 name));
  return *s;
}

}  // namespace

std::string to_chrome_json(const Timeline& t) {
  std::vector<Event> sorted;  // copied only when the caller's events are not yet canonical
  if (!std::is_sorted(t.events.begin(), t.events.end(), canonical_less)) {
    sorted = t.events;
    std::stable_sort(sorted.begin(), sorted.end(), canonical_less);
  }
  const auto& events = sorted.empty() ? t.events : sorted;

  std::set<int> ranks;
  std::set<StreamKey> streams;
  for (const auto& [r, n] : t.rank_names) ranks.insert(r);
  for (const auto& [k, n] : t.stream_names) ranks.insert(k.rank), streams.insert(k);
  for (const auto& e : events) ranks.insert(e.rank), streams.insert({e.rank, e.stream});

  std::string out;
  out.reserve(256 + events.size() * 160);
  out += "{\"traceEvents\":[\n";
  for (int r : ranks) append_meta(out, "process", r, 0, t.rank_name(r), r);
  for (const auto& k : streams) append_meta(out, "thread", k.rank, k.stream, t.stream_name(k.rank, k.stream), k.stream);
  for (size_t i = 0; i < events.size(); ++i) append_event(out, events[i], i);
  append_flows(out, events, t.edges);
  if (out.ends_with(",\n")) out.resize(out.size() - 2), out += "\n";  // JSON allows no trailing comma
  nlohmann::json other = {{"format", kFormat}, {"version", kVersion}, {"source", to_string(t.source)},
                          {"metadata", t.metadata}};
  std::string od = other.dump();
  if (!t.edges.empty()) od.pop_back(), append_edges(od, t.edges), od += "}";
  fmt::format_to(std::back_inserter(out), "],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{}}}\n", od);
  return out;
}

Timeline from_chrome_json(std::string_view text, const std::string& name) {
  nlohmann::json root;
  try {
    root = parse_json_checked(text, name);
  } catch (const JsonTextError& e) {
    throw TraceError(e.what());
  }
  Timeline t;
  t.source = read_source(root, name);
  if (root.is_object() && root.contains("otherData") && root["otherData"].contains("metadata")) {
    const auto& m = root["otherData"]["metadata"];
    if (!m.is_object()) throw TraceError(fmt::format("{}: otherData.metadata must be an object", name));
    t.metadata = m;
  }
  if (root.is_object() && root.contains("otherData") && root["otherData"].contains("edges"))
    t.edges = read_edges(root["otherData"]["edges"], name);
  const nlohmann::json* events = root.is_array() ? &root : nullptr;
  if (!events) {
    auto it = root.find("traceEvents");
    if (it == root.end() || !it->is_array()) throw TraceError(fmt::format("{}: traceEvents must be an array", name));
    events = &*it;
  }
  for (size_t i = 0; i < events->size(); ++i) {
    const auto& ev = (*events)[i];
    if (!ev.is_object()) throw TraceError(fmt::format("{}: traceEvents[{}] is not an object", name, i));
    std::string ph = string_field(ev, "ph", "", i, name);
    if (ph == "M") {
      std::string what = string_field(ev, "name", "", i, name);
      if (what != "process_name" && what != "thread_name") continue;
      auto args = ev.find("args");
      if (args == ev.end() || !args->is_object() || !args->contains("name") || !args->at("name").is_string())
        throw TraceError(fmt::format("{}: traceEvents[{}]: {} needs args.name", name, i, what));
      std::string n = args->at("name").get<std::string>();
      int pid = int_field(ev, "pid", i, name);
      if (what == "process_name") {
        if (n != fmt::format("rank {}", pid)) t.rank_names[pid] = n;  // defaults are not stored
      } else {
        int tid = int_field(ev, "tid", i, name);
        if (n != fmt::format("stream {}", tid)) t.stream_names[{pid, tid}] = n;
      }
      continue;
    }
    if (ph != "X") continue;  // instants, counters, flows: not part of a Timeline
    Event e;
    e.rank = int_field(ev, "pid", i, name);
    e.stream = int_field(ev, "tid", i, name);
    e.name = string_field(ev, "name", "", i, name);
    e.category = string_field(ev, "cat", "", i, name);
    double ts = time_field(ev, "ts", false, i, name);
    double dur = time_field(ev, "dur", true, i, name);
    e.start_s = ts / 1e6;
    e.end_s = (ts + dur) / 1e6;
    if (auto a = ev.find("args"); a != ev.end() && a->is_object()) {
      // Ranges as the writer writes them back: "not given" (-1) is an absent key, never a negative value.
      e.op = int_arg(*a, "op", -1, 0, kMaxI64, i, name);
      e.layer = static_cast<int>(int_arg(*a, "layer", -1, 0, kMaxInt, i, name));
      e.phase = string_field(*a, "phase", "args.", i, name);
      e.step = static_cast<int>(int_arg(*a, "step", -1, 0, kMaxInt, i, name));
      e.bytes = int_arg(*a, "bytes", 0, 0, kMaxI64, i, name);
      e.flops = number_arg(*a, "flops", true, i, name);
      // Negative samples or spreads are refused below, with the op named.
      e.samples = static_cast<int>(int_arg(*a, "samples", 0, kMinInt, kMaxInt, i, name));
      e.spread_s = number_arg(*a, "spread_us", false, i, name) / 1e6;
      if (e.samples < 0 || e.spread_s < 0 || (e.samples == 0 && e.spread_s != 0))
        throw TraceError(fmt::format("{}: traceEvents[{}] (op {}): args.samples and args.spread_us must be >= 0, "
                                     "spread_us only with samples; got {} and {}",
                                     name, i, e.op, e.samples, e.spread_s * 1e6));
    }
    t.events.push_back(std::move(e));
  }
  return t;
}

void write_chrome_trace(const Timeline& t, const std::string& path) { write_text_file_atomic(path, to_chrome_json(t)); }

Timeline read_chrome_trace(const std::string& path) { return from_chrome_json(read_text_file(path), path); }

}  // namespace rm::traces
