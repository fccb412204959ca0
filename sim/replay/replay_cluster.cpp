#include "sim/replay/replay_cluster.hpp"

#include <algorithm>
#include <cctype>
#include <climits>

#include <fmt/format.h>

#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"

namespace rm::replay {

Cluster load_cluster(const ConfigStore& store, const std::string& name, const std::vector<std::string>& sets) {
  nlohmann::json j{{"cluster", name}};
  for (const auto& s : sets) {
    if (s.rfind("cluster.", 0) != 0 && s.rfind("cluster=", 0) != 0)
      throw ConfigError(fmt::format("--set {}: replay applies only cluster keys (cluster.KEY=VALUE)", s));
    apply_override(j, s, store, "");
  }
  std::string source = "--cluster " + name;
  if (j["cluster"].is_string()) {
    auto loaded = store.load("clusters", j["cluster"].get<std::string>(), "--cluster");
    j["cluster"] = std::move(loaded.json);
    source = loaded.source;
  }
  if (!j["cluster"].is_object()) throw ConfigError(fmt::format("{}: expected a cluster name or object", source));
  return parse_cluster(JsonReader(j["cluster"], source));
}

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "A100", "H100", "V100", ...: a letter and three digits, the GPU's family.
std::string family(const std::string& name) {
  const std::string u = upper(name);
  for (size_t i = 0; i + 4 <= u.size(); ++i)
    if (std::isalpha(static_cast<unsigned char>(u[i])) && std::isdigit(static_cast<unsigned char>(u[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(u[i + 2])) && std::isdigit(static_cast<unsigned char>(u[i + 3])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(u[i - 1]))))
      return u.substr(i, 4);
  return "";
}

// "80GB" -> 80; -1 when the name has no size.
int memory_gb(const std::string& name) {
  const std::string u = upper(name);
  const size_t at = u.find("GB");
  if (at == std::string::npos || at == 0) return -1;
  size_t b = at;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(u[b - 1]))) --b;
  return b == at ? -1 : std::stoi(u.substr(b, at - b));
}

}  // namespace

std::string default_cluster(const ConfigStore& store, const std::string& gpu_name, int gpus) {
  const std::string fam = family(gpu_name);
  if (fam.empty()) return "";
  const int mem = memory_gb(gpu_name);
  std::string best;
  int best_gpus = INT_MAX;
  for (const auto& n : store.names("clusters")) {
    Cluster c;
    try {
      c = load_cluster(store, n, {});
    } catch (const ConfigError&) {
      continue;
    }
    if (family(c.gpu.model) != fam || c.gpus() < gpus) continue;
    if (mem > 0 && memory_gb(c.gpu.model) > 0 && memory_gb(c.gpu.model) != mem) continue;
    if (c.gpus() < best_gpus) best = n, best_gpus = c.gpus();
  }
  return best;
}

}  // namespace rm::replay
