#include "sim/config/config_store.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "sim/config/embedded_configs.hpp"
#include "sim/config/json_reader.hpp"

namespace fs = std::filesystem;

namespace rm {

ConfigStore::ConfigStore(std::vector<std::string> search_dirs) : dirs_(std::move(search_dirs)) {
  // A mistyped folder would otherwise fall through to the embedded configs unnoticed.
  for (const auto& d : dirs_) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) throw ConfigError(fmt::format("config folder \"{}\": no such folder", d));
  }
}

namespace {

// A file's faults are said after what asked for it ("exp.json: $.cluster: /etc/passwd: not valid JSON (...)"):
// the field that named the file is what the user must fix.
LoadedConfig read_named_file(const fs::path& p, const std::string& asked_by) {
  try {
    return {read_json_file(p.string()), p.string(), p.parent_path().string()};
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", asked_by, e.what()));
  }
}

}  // namespace

LoadedConfig ConfigStore::load(const std::string& kind, const std::string& name, const std::string& asked_by,
                               const std::string& relative_to) const {
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".json") || name.ends_with(".json.gz");
  if (is_path) {
    fs::path p(name);
    if (p.is_relative() && !relative_to.empty()) p = fs::path(relative_to) / p;
    std::error_code ec;  // a name too long for the file system is an answer, not a filesystem_error
    if (!fs::exists(p, ec))
      throw ConfigError(fmt::format("{}: {} file \"{}\" {}", asked_by, kind, p.string(),
                                    ec ? "cannot be looked up (" + ec.message() + ")" : "not found"));
    return read_named_file(p, asked_by);
  }
  for (const auto& d : dirs_) {
    fs::path p = fs::path(d) / kind / (name + ".json");
    std::error_code ec;
    if (fs::exists(p, ec)) return read_named_file(p, asked_by);
  }
  const std::string rel = kind + "/" + name + ".json";
  for (const auto& e : embedded_configs()) {
    if (e.path == rel) {
      std::string source = "<embedded>/" + rel;
      return {parse_json_text(e.text, source), source, ""};
    }
  }
  auto known = names(kind);
  throw ConfigError(fmt::format("{}: unknown {} \"{}\" (known: {})", asked_by, kind.substr(0, kind.size() - 1), name,
                                fmt::join(known, ", ")));
}

std::vector<std::string> ConfigStore::names(const std::string& kind) const {
  std::set<std::string> out;
  for (const auto& d : dirs_) {
    fs::path dir = fs::path(d) / kind;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& f : fs::directory_iterator(dir, ec))
      if (f.path().extension() == ".json") out.insert(f.path().stem().string());
  }
  const std::string prefix = kind + "/";
  for (const auto& e : embedded_configs()) {
    if (e.path.starts_with(prefix)) {
      std::string_view rest = e.path.substr(prefix.size());
      if (rest.ends_with(".json")) out.insert(std::string(rest.substr(0, rest.size() - 5)));
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace rm
