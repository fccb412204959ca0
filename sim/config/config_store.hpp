// Where configs come from: a named config ("clusters/a100-40g-4x8-hdr") is
// looked up first in the user's folders (--configs DIR), then in the copy
// embedded in the binary. A value ending in ".json" is a file path instead.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rm {

struct LoadedConfig {
  nlohmann::json json;
  std::string source;    // file path, or "<embedded>/clusters/x.json"
  std::string base_dir;  // folder relative paths inside it resolve against ("" when embedded)
};

class ConfigStore {
 public:
  // Throws ConfigError when a search folder does not exist.
  explicit ConfigStore(std::vector<std::string> search_dirs = {});

  // kind: "clusters", "models", "patterns", "kernels", "experiments". name: a bare name or a path to a .json file
  // (relative to relative_to when not absolute). Throws ConfigError naming `asked_by` when not found.
  LoadedConfig load(const std::string& kind, const std::string& name, const std::string& asked_by,
                    const std::string& relative_to = "") const;
  // Names available for a kind (user folders and embedded), sorted, unique.
  std::vector<std::string> names(const std::string& kind) const;

 private:
  std::vector<std::string> dirs_;
};

}  // namespace rm
