// --emit experiment: the layout as a complete experiment file. Named parts
// (cluster, model, pattern, kernel) are written by name where the shipped or
// --configs copy of that name is exactly what was simulated, else inline, so
// `ringmaster simulate FILE` loads back the same experiment either way.
#include <fmt/format.h>

#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

namespace {

// node becomes its "name" when the store's config of that name is the same JSON.
void name_if_unchanged(nlohmann::json& node, const char* kind, const ConfigStore& store) {
  if (!node.is_object() || !node.contains("name") || !node["name"].is_string()) return;
  try {
    const LoadedConfig named = store.load(kind, node["name"].get<std::string>(), "--emit experiment");
    if (named.json == node) node = node["name"];
  } catch (const ConfigError&) {
    // no config of that name: stays inline
  }
}

}  // namespace

Emission emit_experiment(const Experiment& e, const ConfigStore& store) {
  Emission out;
  out.framework = Framework::experiment;
  out.runs = with_parallel(e, e.parallel);
  nlohmann::json j = out.runs.resolved;
  // Says what the file is; the description it came with follows.
  const std::string was = j.value("description", std::string());
  j["description"] = fmt::format("ringmaster --emit experiment of {}: {}{}", out.runs.name,
                                 layout_line(out.runs.parallel), was.empty() ? "" : ". " + was);
  name_if_unchanged(j["cluster"], "clusters", store);
  name_if_unchanged(j["model"], "models", store);
  if (j.contains("workload")) name_if_unchanged(j["workload"]["pattern"], "patterns", store);
  if (j.contains("kernel")) name_if_unchanged(j["kernel"]["attention"], "kernels", store);
  out.text = j.dump(2) + "\n";
  return out;
}

}  // namespace rm::frameworks
