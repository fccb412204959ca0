#include "sim/compare/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "traces/timeline_join.hpp"

namespace rm::compare {

using traces::Event;
using traces::Timeline;

namespace {

std::optional<std::string> hash_of(const Timeline& t) {
  const auto h = t.metadata.find("schedule_hash");
  if (h == t.metadata.end() || !h->is_string()) return std::nullopt;
  return h->get<std::string>();
}

// "0-3" for a run of ids, "0, 2, 5" otherwise (at most 8 listed).
std::string rank_list(const std::vector<int>& r) {
  if (r.empty()) return "none";
  bool run = true;
  for (size_t i = 1; i < r.size(); ++i) run = run && r[i] == r[i - 1] + 1;
  if (run && r.size() > 1) return fmt::format("{}-{}", r.front(), r.back());
  std::string out;
  for (size_t i = 0; i < r.size() && i < 8; ++i) out += fmt::format("{}{}", i ? ", " : "", r[i]);
  if (r.size() > 8) out += fmt::format(", ... ({} ranks)", r.size());
  return out;
}

void check_joinable(const Timeline& t, const std::string& name) {
  if (t.events.empty()) throw ConfigError(fmt::format("{}: no events (expected a Timeline of a Schedule's ops)", name));
  if (std::none_of(t.events.begin(), t.events.end(), [](const Event& e) { return e.op >= 0; }))
    throw ConfigError(fmt::format("{}: no event carries an op id (args.op): nothing to join on", name));
}

Errors errors_of(const std::vector<const OpPair*>& ops) {
  Errors e;
  double abs_rel = 0, abs_err = 0, m_sum = 0;
  for (const OpPair* p : ops) {
    ++e.count;
    e.predicted_s += p->predicted_s();
    e.measured_s += p->measured_s();
    if (p->samples > 0 && std::abs(p->error_s()) <= p->measured_spread_s) ++e.within_spread;
    if (p->measured_s() > 0) {
      ++e.mape_ops;
      abs_rel += std::abs(p->error_s()) / p->measured_s();
      abs_err += std::abs(p->error_s());
      m_sum += p->measured_s();
    }
  }
  e.error_s = e.predicted_s - e.measured_s;
  if (e.measured_s != 0) e.rel_error = e.error_s / e.measured_s;
  if (e.mape_ops > 0) {
    e.mape = abs_rel / static_cast<double>(e.mape_ops);
    e.weighted_mape = abs_err / m_sum;
  }
  return e;
}

// Groups ops by a key; numeric keys sort ascending with "-" (-1: not given)
// last, named keys by measured time descending, then name.
template <class KeyOf>
std::vector<GroupRow> group_by(const std::vector<OpPair>& ops, bool numeric, KeyOf key_of) {
  std::map<std::pair<int64_t, std::string>, std::vector<const OpPair*>> groups;
  for (const OpPair& p : ops) {
    const auto [n, s] = key_of(p);
    groups[{numeric ? (n < 0 ? INT64_MAX : n) : 0, s}].push_back(&p);
  }
  std::vector<GroupRow> rows;
  for (const auto& [k, members] : groups) rows.push_back({k.second, errors_of(members)});
  if (!numeric)
    std::stable_sort(rows.begin(), rows.end(),
                     [](const GroupRow& a, const GroupRow& b) { return a.errors.measured_s > b.errors.measured_s; });
  return rows;
}

std::pair<int64_t, std::string> number_key(int v) {
  return {v, v < 0 ? std::string("-") : std::to_string(v)};
}

OpPair pair_of(const traces::JoinedEvent& j) {
  const Event& p = *j.left;
  const Event& m = *j.right;
  OpPair o;
  o.op = j.op;
  o.rank = j.rank;
  o.stream = m.stream;
  o.kind = m.category;
  o.name = m.name;
  o.layer = m.layer;
  o.step = m.step;
  o.phase = m.phase;
  o.predicted_start_s = p.start_s;
  o.predicted_end_s = p.end_s;
  o.measured_start_s = m.start_s;
  o.measured_end_s = m.end_s;
  o.measured_spread_s = m.spread_s;
  o.samples = m.samples;
  return o;
}

// A Schedule holding only what report::critical_path reads of one (each op's
// kind and phase), from the measured events, for a comparison without the
// Schedule file. nullopt when the op ids are too sparse to index densely.
std::optional<schedule::Schedule> shell_schedule(const Timeline& m) {
  int64_t max_op = -1;
  for (const Event& e : m.events) max_op = std::max(max_op, e.op);
  if (max_op < 0 || max_op > 4 * static_cast<int64_t>(m.events.size()) + 1024) return std::nullopt;
  schedule::Schedule s;
  s.ops.resize(static_cast<size_t>(max_op) + 1);
  for (size_t i = 0; i < s.ops.size(); ++i) s.ops[i].id = static_cast<int64_t>(i);
  for (const Event& e : m.events) {
    if (e.op < 0) continue;
    schedule::Op& op = s.ops[static_cast<size_t>(e.op)];
    op.rank = e.rank;
    op.stream = e.stream;
    op.kind = schedule::parse_op_kind(e.category).value_or(schedule::OpKind::gemm);
    op.phase = schedule::parse_phase(e.phase).value_or(schedule::Phase::forward);
  }
  return s;
}

}  // namespace

double step_time_s(const Timeline& t) {
  const auto it = t.metadata.find("iteration_s");
  if (it != t.metadata.end() && it->is_object()) {
    const auto med = it->find("median");
    if (med != it->end() && med->is_number()) return med->get<double>();
  }
  return t.makespan_s();
}

Comparison compare(const Timeline& predicted, const Timeline& measured, const CompareOptions& o) {
  check_joinable(predicted, o.predicted_name);
  check_joinable(measured, o.measured_name);
  const auto hp = hash_of(predicted), hm = hash_of(measured);
  if (hp && hm && *hp != *hm)
    throw ConfigError(fmt::format("{}: schedule_hash {}, but {} has {}: they ran different Schedules", o.measured_name,
                                  *hm, o.predicted_name, *hp));
  if (predicted.ranks() != measured.ranks())
    throw ConfigError(fmt::format("{}: ranks {}, but {} has ranks {}: not the same job", o.measured_name,
                                  rank_list(measured.ranks()), o.predicted_name, rank_list(predicted.ranks())));

  Comparison c;
  const traces::TimelineJoin join = traces::join_on_op(predicted, measured);
  for (const auto& j : join.pairs) {
    if (j.left->category != j.right->category)
      throw ConfigError(fmt::format("{}: op {} on rank {} is {} there but {} in {}: not the same Schedule",
                                    o.measured_name, j.op, j.rank, j.right->category, j.left->category,
                                    o.predicted_name));
    c.ops.push_back(pair_of(j));
  }
  auto one_sided = [](const std::vector<const Event*>& only, int64_t& count, std::map<std::string, int64_t>& by_kind,
                      std::vector<int64_t>& listed) {
    std::set<int64_t> ids;
    for (const Event* e : only) {
      ++count;
      ++by_kind[e->category];
      ids.insert(e->op);
    }
    for (int64_t id : ids) {
      if (listed.size() == kListedOneSided) break;
      listed.push_back(id);
    }
  };
  one_sided(join.left_only, c.predicted_only, c.predicted_only_by_kind, c.predicted_only_ops);
  one_sided(join.right_only, c.measured_only, c.measured_only_by_kind, c.measured_only_ops);

  c.predicted_step_s = step_time_s(predicted);
  c.measured_step_s = step_time_s(measured);
  c.step_error_s = c.predicted_step_s - c.measured_step_s;
  if (c.measured_step_s != 0) c.step_rel_error = c.step_error_s / c.measured_step_s;

  std::vector<const OpPair*> all;
  for (const OpPair& p : c.ops) all.push_back(&p);
  c.all = errors_of(all);
  c.by_kind = group_by(c.ops, false, [](const OpPair& p) { return std::pair<int64_t, std::string>{0, p.kind}; });
  c.by_phase = group_by(c.ops, false, [](const OpPair& p) {
    return std::pair<int64_t, std::string>{0, p.phase.empty() ? std::string("-") : p.phase};
  });
  c.by_rank = group_by(c.ops, true, [](const OpPair& p) { return number_key(p.rank); });
  c.by_step = group_by(c.ops, true, [](const OpPair& p) { return number_key(p.step); });
  c.by_layer = group_by(c.ops, true, [](const OpPair& p) { return number_key(p.layer); });

  // Top contributors: the joined ops on the measured critical path.
  std::vector<const OpPair*> basis;
  std::optional<schedule::Schedule> shell;
  const schedule::Schedule* s = o.schedule;
  if (!s && !measured.edges.empty() && (shell = shell_schedule(measured))) s = &*shell;
  if (s && !measured.edges.empty()) {
    c.top_basis = "measured critical path";
    std::unordered_map<int64_t, const OpPair*> by_op;
    for (const OpPair& p : c.ops) by_op.try_emplace(p.op, &p);
    std::set<int64_t> seen;
    for (schedule::OpId id : report::critical_path(*s, measured).ops)
      if (const auto it = by_op.find(id); it != by_op.end() && seen.insert(id).second) basis.push_back(it->second);
  } else {
    c.top_basis = "all joined ops";
    basis = all;
  }
  c.path_ops = static_cast<int64_t>(basis.size());
  for (const OpPair* p : basis) c.path_error_s += p->error_s();
  std::stable_sort(basis.begin(), basis.end(), [](const OpPair* a, const OpPair* b) {
    const double x = std::abs(a->error_s()), y = std::abs(b->error_s());
    return x != y ? x > y : a->op < b->op;
  });
  for (size_t i = 0; i < basis.size() && i < o.top_n; ++i) c.top.push_back({*basis[i], basis[i]->error_s()});
  return c;
}

void check_against_schedule(const schedule::Schedule& s, const std::string& schedule_name, const Timeline& measured,
                            const std::string& measured_name) {
  check_joinable(measured, measured_name);
  const std::string want = schedule::schedule_hash(s);
  if (const auto h = hash_of(measured); h && *h != want)
    throw ConfigError(fmt::format("{}: schedule_hash {}, but {} hashes to {}: the trace is of another Schedule",
                                  measured_name, *h, schedule_name, want));
  std::vector<int> ranks(s.ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  if (measured.ranks() != ranks)
    throw ConfigError(fmt::format("{}: ranks {}, but {} has ranks {}: not the same job", measured_name,
                                  rank_list(measured.ranks()), schedule_name, rank_list(ranks)));
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> event_of(s.ops.size(), kNone);  // the event that carries each op
  for (size_t i = 0; i < measured.events.size(); ++i) {
    const Event& e = measured.events[i];
    if (e.op < 0) continue;
    if (static_cast<size_t>(e.op) >= s.ops.size())
      throw ConfigError(fmt::format("{}: event {} names op {}, but {} has {} ops", measured_name, i, e.op,
                                    schedule_name, s.ops.size()));
    const schedule::Op& op = s.ops[static_cast<size_t>(e.op)];
    if (op.rank != e.rank || schedule::to_string(op.kind) != e.category)
      throw ConfigError(fmt::format("{}: event {} is op {} on rank {} ({}), but {} has {}", measured_name, i, e.op,
                                    e.rank, e.category, schedule_name, schedule::describe(s, e.op)));
    // A run executes each op once per iteration and keeps one figure per op: a
    // second event would be joined, counted and fitted as if it were another op.
    size_t& first = event_of[static_cast<size_t>(e.op)];
    if (first != kNone)
      throw ConfigError(fmt::format("{}: events {} and {} both carry op {} (expected one event per op: {})",
                                    measured_name, first, i, e.op, schedule::describe(s, e.op)));
    first = i;
  }
  // The critical path walks the edges by op id: one naming an op the Schedule lacks
  // is another run's (and would otherwise be dropped without a word).
  for (size_t i = 0; i < measured.edges.size(); ++i) {
    const traces::Edge& d = measured.edges[i];
    for (const int64_t id : {d.from, d.to})
      if (id < 0 || static_cast<size_t>(id) >= s.ops.size())
        throw ConfigError(fmt::format("{}: otherData.edges[{}] names op {}, but {} has ops 0..{}", measured_name, i, id,
                                      schedule_name, static_cast<int64_t>(s.ops.size()) - 1));
  }
}

namespace {

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json errors_json(const Errors& e) {
  return {{"count", e.count},   {"predicted_s", e.predicted_s}, {"measured_s", e.measured_s},
          {"error_s", e.error_s}, {"rel_error", opt(e.rel_error)}, {"mape", opt(e.mape)},
          {"weighted_mape", opt(e.weighted_mape)}, {"mape_ops", e.mape_ops}, {"within_spread", e.within_spread}};
}

nlohmann::json rows_json(const std::vector<GroupRow>& rows, const char* key, bool numeric) {
  nlohmann::json out = nlohmann::json::array();
  for (const GroupRow& r : rows) {
    nlohmann::json j = errors_json(r.errors);
    j[key] = numeric ? (r.key == "-" ? nlohmann::json(nullptr) : nlohmann::json(std::stoll(r.key)))
                     : nlohmann::json(r.key);
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json field_or_null(int v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

}  // namespace

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json top = nlohmann::json::array();
  for (const Contributor& t : c.top)
    top.push_back({{"op", t.op.op},
                   {"rank", t.op.rank},
                   {"kind", t.op.kind},
                   {"name", t.op.name},
                   {"layer", field_or_null(t.op.layer)},
                   {"step", field_or_null(t.op.step)},
                   {"phase", t.op.phase},
                   {"predicted_s", t.op.predicted_s()},
                   {"measured_s", t.op.measured_s()},
                   {"error_s", t.error_s},
                   {"share_of_step_error", c.step_error_s != 0 ? nlohmann::json(t.error_s / c.step_error_s)
                                                               : nlohmann::json(nullptr)}});
  return {{"step",
           {{"predicted_s", c.predicted_step_s},
            {"measured_s", c.measured_step_s},
            {"error_s", c.step_error_s},
            {"rel_error", opt(c.step_rel_error)}}},
          {"mape",
           {{"mean", opt(c.all.mape)},
            {"weighted", opt(c.all.weighted_mape)},
            {"ops", c.all.mape_ops},
            {"zero_measured_ops", c.all.count - c.all.mape_ops}}},
          {"ops",
           {{"joined", c.ops.size()},
            {"predicted_only", c.predicted_only},
            {"measured_only", c.measured_only},
            {"predicted_only_by_kind", c.predicted_only_by_kind},
            {"measured_only_by_kind", c.measured_only_by_kind},
            {"predicted_only_ops", c.predicted_only_ops},
            {"measured_only_ops", c.measured_only_ops}}},
          {"all", errors_json(c.all)},
          {"by_kind", rows_json(c.by_kind, "kind", false)},
          {"by_phase", rows_json(c.by_phase, "phase", false)},
          {"by_rank", rows_json(c.by_rank, "rank", true)},
          {"by_step", rows_json(c.by_step, "step", true)},
          {"by_layer", rows_json(c.by_layer, "layer", true)},
          {"top_contributors",
           {{"basis", c.top_basis}, {"path_ops", c.path_ops}, {"path_error_s", c.path_error_s}, {"ops", top}}}};
}

std::string to_csv(const Comparison& c) {
  std::string out =
      "op,rank,stream,kind,layer,step,phase,predicted_start_s,predicted_end_s,predicted_s,measured_start_s,"
      "measured_end_s,measured_s,error_s,measured_spread_s,samples\n";
  // Kinds and phases are identifiers of ours (no comma or quote); written as they are.
  for (const OpPair& p : c.ops)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", p.op, p.rank, p.stream, p.kind,
                       p.layer < 0 ? std::string() : std::to_string(p.layer),
                       p.step < 0 ? std::string() : std::to_string(p.step), p.phase, p.predicted_start_s,
                       p.predicted_end_s, p.predicted_s(), p.measured_start_s, p.measured_end_s, p.measured_s(),
                       p.error_s(), p.measured_spread_s, p.samples);
  return out;
}

int side_by_side_offset(const Timeline& predicted, const Timeline& measured) {
  int top = 0;
  for (const Timeline* t : {&predicted, &measured}) {
    for (int r : t->ranks()) top = std::max(top, r);
    for (const auto& [r, n] : t->rank_names) top = std::max(top, r);
  }
  int offset = 100;
  while (offset <= top) offset *= 10;
  return offset;
}

Timeline side_by_side(const Timeline& predicted, const Timeline& measured) {
  const int offset = side_by_side_offset(predicted, measured);
  Timeline out;
  out.source = predicted.source;
  out.metadata = {{"side_by_side",
                   {{"measured_pid_offset", offset},
                    {"predicted", {{"source", traces::to_string(predicted.source)}, {"metadata", predicted.metadata}}},
                    {"measured", {{"source", traces::to_string(measured.source)}, {"metadata", measured.metadata}}}}}};
  auto add = [&](const Timeline& t, int shift, const std::string& label) {
    std::set<int> ranks;
    for (const auto& [r, n] : t.rank_names) ranks.insert(r);
    for (int r : t.ranks()) ranks.insert(r);
    for (int r : ranks) out.rank_names[r + shift] = label + " " + t.rank_name(r);
    for (const auto& [k, n] : t.stream_names) out.stream_names[{k.rank + shift, k.stream}] = n;
    for (Event e : t.events) {
      e.rank += shift;
      out.events.push_back(std::move(e));
    }
  };
  add(predicted, 0, "predicted");
  add(measured, offset, "measured");
  out.sort();
  return out;
}

}  // namespace rm::compare
