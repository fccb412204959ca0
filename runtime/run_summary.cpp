#include "runtime/run_summary.hpp"

#include <map>

#include <fmt/format.h>

namespace rm::runtime {

nlohmann::json summary_json(const traces::Timeline& t, const std::optional<CheckReport>& check, int ranks,
                            const std::string& trace_path) {
  nlohmann::json j;
  j["source"] = std::string(traces::to_string(t.source));
  j["ranks"] = ranks;
  for (const char* k : {"generator", "iterations", "warmup", "schedule_hash", "max_clock_uncertainty_s", "iteration_s"})
    if (t.metadata.contains(k)) j[k] = t.metadata[k];
  struct Kind {
    int64_t ops = 0;
    double seconds = 0;
  };
  std::map<std::string, Kind> kinds;
  for (const auto& e : t.events) {
    Kind& k = kinds[e.category];
    ++k.ops;
    k.seconds += e.duration_s();
  }
  j["kinds"] = nlohmann::json::array();
  for (const auto& [name, k] : kinds)
    j["kinds"].push_back({{"kind", name}, {"ops", k.ops}, {"seconds_per_rank", k.seconds / std::max(1, ranks)}});
  if (check) {
    nlohmann::json c = {{"bound", check->bound}, {"passed", check->passed()}, {"tensors", nlohmann::json::array()}};
    for (const auto& x : check->tensors) {
      c["tensors"].push_back({{"name", x.name}, {"elements", x.elements}, {"max_rel_error", x.max_rel_error},
                              {"max_abs_error", x.max_abs_error}, {"max_ref", x.max_ref},
                              {"bound", x.bound}, {"passed", x.passed()}});
      if (!x.note.empty()) c["tensors"].back()["note"] = x.note;
    }
    j["check"] = c;
  }
  if (!trace_path.empty()) j["trace"] = trace_path;
  return j;
}

std::string summary_table(const nlohmann::json& j) {
  std::string out;
  const auto& it = j.value("iteration_s", nlohmann::json::object());
  out += fmt::format("ringmaster-run: {} ranks ({}), {} timed iterations after {} warm-up\n", j.value("ranks", 0),
                     j.value("source", ""), j.value("iterations", 0), j.value("warmup", 0));
  if (!it.empty())
    out += fmt::format("step time {:.6f} s median (min {:.6f}, max {:.6f}); clocks aligned within {:.1f} us\n",
                       it.value("median", 0.0), it.value("min", 0.0), it.value("max", 0.0),
                       j.value("max_clock_uncertainty_s", 0.0) * 1e6);
  out += fmt::format("{:<16}{:>8}{:>16}\n", "op kind", "ops", "s per rank");
  out += std::string(40, '-') + "\n";
  for (const auto& k : j["kinds"])
    out += fmt::format("{:<16}{:>8}{:>16.6f}\n", k["kind"].get<std::string>(), k["ops"].get<int64_t>(),
                       k["seconds_per_rank"].get<double>());
  if (j.contains("trace")) out += "measured Timeline written to " + j["trace"].get<std::string>() + "\n";
  return out;
}

}  // namespace rm::runtime
