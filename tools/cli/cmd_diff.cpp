// `ringmaster diff A.json B.json`: two `simulate --json` outputs side by
// side — which inputs differ (experiment keys and --set overrides) and where
// the time moved (step time, breakdown, per phase, critical path by kind,
// link utilisation, the bound-by verdict). A table by default, --json for machines.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/json_reader.hpp"
#include "traces/json_text.hpp"
#include "traces/text_file.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

using nlohmann::json;

struct Options {
  std::string a, b;
  bool json = false;
};

json read_simulate_json(const std::string& path) {
  // Through the checked reader, as every input: depth (10^5 brackets once
  // crashed diff), repeated keys (a second step_time_s was taken silently),
  // NUL bytes, the file rules (regular files only, the size limit).
  json j;
  try {
    j = traces::parse_json_checked(traces::read_text_file(path), path);
  } catch (const std::exception& e) {  // TraceError, JsonTextError: one line naming the file
    throw ConfigError(fmt::format("{} (expected the output of `ringmaster simulate --json`)", e.what()));
  }
  for (const char* k : {"step_time_s", "experiment", "breakdown", "critical_path"})
    if (!j.is_object() || !j.contains(k))
      throw ConfigError(fmt::format("{}: not a `ringmaster simulate --json` output (no key \"{}\")", path, k));
  if (!j["step_time_s"].is_number() || !j["experiment"].is_object())
    throw ConfigError(fmt::format("{}: not a `ringmaster simulate --json` output (step_time_s must be a number, "
                                  "experiment an object)",
                                  path));
  return j;
}

// The value at a dotted path; nullopt when any step is missing or it is no number.
std::optional<double> number_at(const json& j, const std::string& path) {
  const json* p = &j;
  size_t i = 0;
  while (i <= path.size()) {
    const size_t dot = std::min(path.find('.', i), path.size());
    const std::string key = path.substr(i, dot - i);
    if (!p->is_object() || !p->contains(key)) return std::nullopt;
    p = &(*p)[key];
    i = dot + 1;
  }
  if (!p->is_number()) return std::nullopt;
  return p->get<double>();
}

// The inputs of a run: its experiment flattened to dotted keys, its engine and its --set overrides.
std::map<std::string, std::string> inputs(const json& j) {
  std::map<std::string, std::string> out, extra;
  auto flatten = [&](auto&& self, const json& v, const std::string& prefix) -> void {
    if (v.is_object()) {
      for (const auto& [k, x] : v.items()) self(self, x, prefix.empty() ? k : prefix + "." + k);
      return;
    }
    out[prefix] = v.is_string() ? v.get<std::string>() : v.dump();
  };
  flatten(flatten, j["experiment"], "");
  if (j.contains("engine")) flatten(flatten, j["engine"], "engine");
  // Overrides of keys the experiment does not echo (cluster fields, kernel
  // rates); the others show as the experiment key they set.
  if (j.contains("overrides") && j["overrides"].is_object())
    for (const auto& [k, v] : j["overrides"].items())
      if (!out.count(k)) extra["--set " + k] = v.is_string() ? v.get<std::string>() : v.dump();
  out.insert(extra.begin(), extra.end());
  return out;
}

// A key run `other` set with --set and run `run` did not: `run` held the value
// the override replaced (`simulate --json` records it as override_bases), when
// both ran the same experiment file and `run` overrode no part above that key.
void fill_bases(std::map<std::string, std::string>& mine, const std::map<std::string, std::string>& theirs,
                const json& run, const json& other) {
  if (!other.contains("override_bases") || !other["override_bases"].is_object()) return;
  if (run["experiment"].value("source", "") != other["experiment"].value("source", "")) return;
  for (const auto& [key, base] : other["override_bases"].items()) {
    const std::string k = "--set " + key;
    if (!theirs.count(k) || mine.count(k) || base.is_null()) continue;  // only the keys shown as --set
    bool above = false;  // e.g. run set cluster=..., other set cluster.nodes
    if (run.contains("overrides") && run["overrides"].is_object())
      for (const auto& [mk, mv] : run["overrides"].items()) above = above || key == mk || key.starts_with(mk + ".");
    if (!above) mine[k] = base.is_string() ? base.get<std::string>() : base.dump();
  }
}

struct Row {
  std::string name;
  std::optional<double> a, b;
};

// Rows keyed by a name built from each element of an array (critical path by kind, phases, links).
// A row's key field as text: a report of another version (or a hand-edited one)
// may hold a number there, which names the row as well as a string does.
std::string key_text(const json& e, const char* key) {
  if (!e.contains(key)) return "";
  const json& v = e[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::vector<Row> keyed_rows(const json& ja, const json& jb, const std::string& array_path, auto key_of,
                            const std::string& value) {
  std::map<std::string, Row> rows;
  std::vector<std::string> order;
  auto take = [&](const json& j, bool first) {
    const json* p = &j;
    size_t i = 0;
    while (i <= array_path.size()) {
      const size_t dot = std::min(array_path.find('.', i), array_path.size());
      const std::string k = array_path.substr(i, dot - i);
      if (!p->is_object() || !p->contains(k)) return;
      p = &(*p)[k];
      i = dot + 1;
    }
    if (!p->is_array()) return;
    for (const json& e : *p) {
      if (!e.is_object() || !e.contains(value) || !e[value].is_number()) continue;
      const std::string k = key_of(e);
      auto [it, fresh] = rows.try_emplace(k, Row{k, std::nullopt, std::nullopt});
      if (fresh) order.push_back(k);
      (first ? it->second.a : it->second.b) = e[value].get<double>();
    }
  };
  take(ja, true);
  take(jb, false);
  std::vector<Row> out;
  for (const auto& k : order) out.push_back(rows[k]);
  return out;
}

// B - A; 0 where the two agree to 12 digits (sums of one figure in another
// order differ in the last bits, which is no change).
double change(const Row& r) {
  const double a = r.a.value_or(0), b = r.b.value_or(0);
  return std::abs(b - a) <= 1e-12 * std::max(std::abs(a), std::abs(b)) ? 0.0 : b - a;
}

// Largest change first (first listed on ties); unchanged rows dropped (a
// figure one run lacks counts as 0 there).
std::vector<Row> moved(std::vector<Row> rows) {
  std::erase_if(rows, [](const Row& r) { return change(r) == 0; });
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& x, const Row& y) { return std::abs(change(x)) > std::abs(change(y)); });
  return rows;
}

json rows_json(const std::vector<Row>& rows) {
  json out = json::array();
  for (const Row& r : rows)
    out.push_back({{"name", r.name},
                   {"a", r.a ? json(*r.a) : json(nullptr)},
                   {"b", r.b ? json(*r.b) : json(nullptr)},
                   {"change", change(r)}});
  return out;
}

std::string cell(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : "-"; }
std::string relative(const Row& r) {
  if (!r.a || !r.b || *r.a == 0) return "";
  return fmt::format("{:+.1f}%", 100 * change(r) / std::abs(*r.a));
}

// At most `limit` rows (the JSON has them all).
constexpr size_t kTextRows = 12;
std::string rows_text(const std::string& title, const std::vector<Row>& rows, size_t limit = kTextRows) {
  if (rows.empty()) return title + ": no change\n\n";
  Table t({title, "A", "B", "change", "change %"});
  for (size_t i = 0; i < rows.size() && i < limit; ++i)
    t.row({rows[i].name, cell(rows[i].a), cell(rows[i].b), fmt::format("{:+.6g}", change(rows[i])), relative(rows[i])});
  std::string out = t.str();
  if (rows.size() > limit) out += fmt::format("({} more rows in --json)\n", rows.size() - limit);
  return out + "\n";
}

std::string verdict_of(const json& j) {
  if (j.contains("bound_by") && j["bound_by"].is_object() && j["bound_by"].contains("verdict") &&
      j["bound_by"]["verdict"].is_string())
    return j["bound_by"]["verdict"].get<std::string>();
  return "(not in this file)";
}

void run(const Options& o) {
  const json a = read_simulate_json(o.a), b = read_simulate_json(o.b);

  // Inputs: every key either run has, where the two differ.
  auto ia = inputs(a), ib = inputs(b);
  fill_bases(ia, ib, a, b);
  fill_bases(ib, ia, b, a);
  std::set<std::string> keys;
  for (const auto& [k, v] : ia) keys.insert(k);
  for (const auto& [k, v] : ib) keys.insert(k);
  std::vector<std::array<std::string, 3>> changed;
  for (const auto& k : keys) {
    const auto x = ia.find(k), y = ib.find(k);
    const std::string va = x == ia.end() ? "-" : x->second, vb = y == ib.end() ? "-" : y->second;
    if (va != vb) changed.push_back({k, va, vb});
  }

  // Figures, in a fixed order.
  std::vector<Row> figures;
  for (const char* p : {"step_time_s", "tokens_per_s", "mfu", "hfu", "breakdown.mean.compute_s",
                        "breakdown.mean.exposed_comm_s", "breakdown.mean.idle_s", "breakdown.max.compute_s",
                        "breakdown.max.exposed_comm_s", "breakdown.max.idle_s", "imbalance.step_measured",
                        "critical_path.compute_s", "critical_path.communication_s", "critical_path.waiting_s"})
    figures.push_back({p, number_at(a, p), number_at(b, p)});
  const auto by_kind = moved(keyed_rows(
      a, b, "critical_path.by_kind",
      [](const json& e) { return key_text(e, "kind") + " " + key_text(e, "phase"); }, "seconds"));
  std::vector<Row> phases;
  for (const char* f : {"compute_mean_s", "exposed_comm_mean_s", "critical_compute_s", "critical_comm_s"})
    for (Row& r : keyed_rows(a, b, "bound_by.phases",
                             [&](const json& e) { return key_text(e, "phase") + " " + f; }, f))
      phases.push_back(std::move(r));
  // Links: the busiest of each kind, then each link both runs list (each lists only its busiest).
  std::vector<Row> link_rows = keyed_rows(
      a, b, "bound_by.link_kinds", [](const json& e) { return "busiest " + key_text(e, "kind"); },
      "utilisation");
  for (Row& r : keyed_rows(a, b, "bound_by.links", [](const json& e) { return key_text(e, "name"); },
                           "utilisation"))
    if (r.a && r.b) link_rows.push_back(std::move(r));
  const auto links = moved(std::move(link_rows));

  if (o.json) {
    json inputs_j = json::array();
    for (const auto& [k, va, vb] : changed) inputs_j.push_back({{"key", k}, {"a", va}, {"b", vb}});
    const json out{{"a", o.a},
                   {"b", o.b},
                   {"inputs", inputs_j},
                   {"figures", rows_json(figures)},
                   {"phases", rows_json(moved(phases))},
                   {"critical_path_by_kind", rows_json(by_kind)},
                   {"link_utilisation", rows_json(links)},
                   {"verdict", {{"a", verdict_of(a)}, {"b", verdict_of(b)}}}};
    traces::write_standard_output(out.dump(2) + "\n");
    return;
  }
  std::string text = fmt::format("A = {}\nB = {}\n\n", o.a, o.b);
  if (changed.empty()) {
    text += "inputs: identical\n\n";
  } else {
    Table t({"input", "A", "B"});
    for (const auto& [k, va, vb] : changed) t.row({k, va, vb});
    text += t.str() + "\n";
  }
  const Row& step = figures.front();
  text += fmt::format("step time {} s -> {} s ({})\n\n", cell(step.a), cell(step.b),
                      change(step) == 0 ? "unchanged" : relative(step));
  text += rows_text("figure", figures, figures.size());
  text += rows_text("per phase (s)", moved(phases));
  text += rows_text("critical path by kind (s)", by_kind);
  text += rows_text("link utilisation (of the step)", links);
  text += fmt::format("bound by\n  A: {}\n  B: {}\n", verdict_of(a), verdict_of(b));
  traces::write_standard_output(text);
}

}  // namespace

void register_diff(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("diff", "Compare two `simulate --json` outputs: what changed and where the time moved");
  cmd->add_option("a", o->a, "The first run's `ringmaster simulate --json` output")->required();
  cmd->add_option("b", o->b, "The second run's")->required();
  cmd->add_flag("--json", o->json, "Print JSON for machines instead of tables");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
