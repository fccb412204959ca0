#include "sim/sparsity/index_file.hpp"

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

namespace rm::sparsity {

namespace {

IntervalSet read_indices(const JsonReader& r, const char* key) {
  return IntervalSet::from_points(r.int_list(key, 0, kUnbounded - 1));
}

}  // namespace

std::vector<RecordedHead> read_index_file(const std::string& path, int layers, int heads) {
  const nlohmann::json j = read_json_file(path);
  JsonReader top(j, path);
  if (top.str("format") != "ringmaster.sparsity_indices")
    top.fail("format", "expected \"ringmaster.sparsity_indices\"");
  top.integer("version", 1, 1);
  const auto file_layers = top.integer("layers", 1, 1 << 20);
  const auto file_heads = top.integer("heads", 1, 1 << 20);
  if (file_layers != layers || file_heads != heads)
    top.fail("layers", fmt::format("file holds {} layers x {} heads, the model has {} x {}", file_layers, file_heads, layers, heads));
  const auto& idx = top.value("indices");
  if (!idx.is_array() || idx.size() != static_cast<size_t>(layers))
    top.fail("indices", fmt::format("expected an array of {} layers", layers));
  std::vector<RecordedHead> out;
  for (int l = 0; l < layers; ++l) {
    const auto& row = idx[static_cast<size_t>(l)];
    const std::string at = fmt::format("{}.indices[{}]", top.path(), l);
    if (!row.is_array() || row.size() != static_cast<size_t>(heads))
      throw ConfigError(fmt::format("{}: {}: expected an array of {} heads", path, at, heads));
    for (int h = 0; h < heads; ++h) {
      JsonReader head(row[static_cast<size_t>(h)], path, fmt::format("{}[{}]", at, h));
      out.push_back({read_indices(head, "vertical"), read_indices(head, "slash")});
      head.finish();
    }
  }
  top.finish();
  return out;
}

}  // namespace rm::sparsity
