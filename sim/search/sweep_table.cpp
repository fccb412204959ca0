#include "sim/search/sweep_table.hpp"

#include <functional>

#include "sim/memory/memory_model.hpp"

namespace rm::search {

namespace {

struct Metric {
  const char* name;
  std::function<nlohmann::ordered_json(const Outcome&)> value;
};

// The one list of what a row reports about its point (docs/sweep.md, "Columns").
const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {
      {"step_time_s", [](const Outcome& o) { return o.report.step_time_s; }},
      {"tokens_per_s", [](const Outcome& o) { return o.report.tokens_per_s; }},
      {"mfu", [](const Outcome& o) { return o.report.mfu; }},
      {"hfu", [](const Outcome& o) { return o.report.hfu; }},
      {"imbalance_worker", [](const Outcome& o) { return o.report.imbalance.worker; }},
      {"imbalance_step", [](const Outcome& o) { return o.report.imbalance.step; }},
      {"compute_s", [](const Outcome& o) { return o.report.breakdown.mean.compute_s; }},
      {"exposed_comm_s", [](const Outcome& o) { return o.report.breakdown.mean.exposed_comm_s; }},
      {"idle_s", [](const Outcome& o) { return o.report.breakdown.mean.idle_s; }},
      // memory::to_json's figures, so they read as simulate --json's memory.peak_GB and memory.oom.
      {"memory_peak_GB", [](const Outcome& o) { return nlohmann::ordered_json(memory::to_json(o.report.memory)["peak_GB"]); }},
      {"memory_oom", [](const Outcome& o) { return o.report.memory.oom; }},
      // bound_by.hpp's one-cell verdict ("compute", "link pcie ... 80%", "imbalance 46%", ...).
      {"bound_by", [](const Outcome& o) {
         return o.report.bound_by ? nlohmann::ordered_json(report::brief(*o.report.bound_by)) : nlohmann::ordered_json();
       }},
      {"gpus", [](const Outcome& o) { return o.report.gpus; }},
      {"ops", [](const Outcome& o) { return o.ops; }},
      {"generator", [](const Outcome& o) { return o.generator; }},
      // How the point was simulated: whole, or streamed where only that fits (search::simulated_as).
      {"simulated", [](const Outcome& o) { return simulated_as(o); }},
  };
  return m;
}

}  // namespace

const std::vector<std::string>& sweep_metric_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Metric& m : metrics()) n.push_back(m.name);
    return n;
  }();
  return names;
}

std::vector<std::string> sweep_columns(const Grid& grid) {
  std::vector<std::string> c{"point"};
  for (const auto& a : grid.axes()) c.push_back(a.key);
  for (const auto& m : sweep_metric_columns()) c.push_back(m);
  c.push_back("error");
  return c;
}

nlohmann::ordered_json sweep_row(const Grid& grid, const GridPoint& p, const Outcome* outcome) {
  nlohmann::ordered_json row;
  row["point"] = p.index;
  for (size_t k = 0; k < grid.axes().size(); ++k) row[grid.axes()[k].key] = p.inputs.at(k);
  const bool ok = outcome != nullptr && outcome->ok;
  for (const Metric& m : metrics()) row[m.name] = ok ? m.value(*outcome) : nlohmann::ordered_json();
  if (ok) row["error"] = nullptr;
  else row["error"] = outcome != nullptr ? outcome->error : p.error;
  return row;
}

std::string csv_cell_text(const nlohmann::ordered_json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string sweep_csv(const std::vector<std::string>& columns, const std::vector<nlohmann::ordered_json>& rows) {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
      if (c == '"') q += '"';
      q += c;
    }
    return q + '"';
  };
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) out += ',';
    out += cell(columns[i]);
  }
  out += '\n';
  for (const auto& r : rows) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i) out += ',';
      const auto it = r.find(columns[i]);
      if (it != r.end()) out += cell(csv_cell_text(*it));
    }
    out += '\n';
  }
  return out;
}

}  // namespace rm::search
