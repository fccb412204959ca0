#include "sim/search/grid.hpp"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/config/json_reader.hpp"

namespace rm::search {

GridAxis parse_grid_axis(const std::string& spec) {
  GridAxis a;
  a.spec = spec;
  const auto eq = spec.find('=');
  if (eq == std::string::npos)
    throw ConfigError(fmt::format("--grid {}: expected KEY=V1,V2,..., e.g. parallel.cp=8,16,32", spec));
  a.key = spec.substr(0, eq);
  if (a.key.empty()) throw ConfigError(fmt::format("--grid {}: empty key before '='", spec));
  // Split at top-level commas: a JSON array, object or string value keeps its own.
  std::string cur;
  int depth = 0;
  bool quoted = false, escaped = false;
  auto push = [&] {
    if (cur.empty())
      throw ConfigError(fmt::format("--grid {}: empty value (expected KEY=V1,V2,... with no empty item)", spec));
    a.values.push_back(cur);
    cur.clear();
  };
  for (size_t i = eq + 1; i < spec.size(); ++i) {
    const char c = spec[i];
    if (quoted) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      push();
      continue;
    }
    cur += c;
  }
  push();
  std::set<std::string> seen;
  for (const auto& v : a.values)
    if (!seen.insert(v).second) throw ConfigError(fmt::format("--grid {}: value \"{}\" is given twice", spec, v));
  return a;
}

Grid::Grid(std::vector<GridAxis> axes) : axes_(std::move(axes)) {
  if (axes_.empty()) throw ConfigError("--grid: a sweep needs at least one --grid KEY=V1,V2,...");
  std::set<std::string> keys;
  for (const auto& a : axes_) {
    if (!keys.insert(a.key).second)
      throw ConfigError(fmt::format("--grid {}: key {} is on another --grid too (give its values once)", a.spec, a.key));
    if (a.values.empty()) throw ConfigError(fmt::format("--grid {}: no values", a.spec));
    size_ *= static_cast<int64_t>(a.values.size());
    if (size_ > kMaxGridPoints)
      throw ConfigError(fmt::format("--grid {}: the grid would have more than {} points; split the sweep", a.spec,
                                    kMaxGridPoints));
  }
}

std::vector<int> Grid::value_indices(int64_t point) const {
  std::vector<int> idx(axes_.size());
  for (size_t k = axes_.size(); k-- > 0;) {
    const auto n = static_cast<int64_t>(axes_[k].values.size());
    idx[k] = static_cast<int>(point % n);
    point /= n;
  }
  return idx;
}

std::vector<std::string> Grid::assignments(int64_t point) const {
  const std::vector<int> idx = value_indices(point);
  std::vector<std::string> out;
  out.reserve(axes_.size());
  for (size_t k = 0; k < axes_.size(); ++k) out.push_back(axes_[k].key + "=" + axes_[k].values[idx[k]]);
  return out;
}

nlohmann::json resolved_value(const Experiment& e, const std::string& key) {
  auto at = [&](const nlohmann::json& root) -> nlohmann::json {
    const nlohmann::json* node = &root;
    for (size_t start = 0;;) {
      const auto dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object() || !node->contains(part)) return nullptr;
      node = &(*node)[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return node->is_structured() ? nlohmann::json() : *node;
  };
  nlohmann::json v = at(summary_json(e));
  return v.is_null() ? at(e.resolved) : v;
}

std::vector<GridPoint> load_grid(const Grid& grid, const ConfigStore& store, const std::string& file,
                                 const std::vector<std::string>& sets) {
  const auto& axes = grid.axes();
  std::vector<GridPoint> points(static_cast<size_t>(grid.size()));
  // used[k][v]: the first point with value v on axis k that loaded (-1: none yet).
  std::vector<std::vector<int64_t>> used(axes.size());
  for (size_t k = 0; k < axes.size(); ++k) used[k].assign(axes[k].values.size(), -1);

  for (int64_t i = 0; i < grid.size(); ++i) {
    GridPoint& p = points[i];
    p.index = i;
    std::vector<std::string> all = sets;
    for (auto& a : grid.assignments(i)) all.push_back(std::move(a));
    try {
      p.experiment = load_experiment(store, file, all);
    } catch (const ConfigError& err) {
      p.error = err.what();
      continue;
    }
    const std::vector<int> idx = grid.value_indices(i);
    for (size_t k = 0; k < axes.size(); ++k)
      if (used[k][idx[k]] < 0) used[k][idx[k]] = i;
  }

  // A value no point can use is bad input (a key that does not exist, a value
  // of the wrong type, a layout no combination fits), named by the first point
  // that shows it: the first point that loads with that one value changed.
  int64_t first_ok = -1;
  for (const GridPoint& p : points)
    if (p.experiment) {
      first_ok = p.index;
      break;
    }
  if (first_ok < 0) {
    // Nothing loads. When the experiment loads without the grid, blame the
    // first value that breaks it alone.
    bool base_loads = true;
    try {
      (void)load_experiment(store, file, sets);
    } catch (const ConfigError&) {
      base_loads = false;
    }
    for (size_t k = 0; k < axes.size() && base_loads; ++k)
      for (const std::string& v : axes[k].values) {
        std::vector<std::string> alone = sets;
        alone.push_back(axes[k].key + "=" + v);
        try {
          (void)load_experiment(store, file, alone);
        } catch (const ConfigError& err) {
          throw ConfigError(fmt::format("--grid {}: value \"{}\": {}", axes[k].spec, v, err.what()));
        }
      }
    throw ConfigError(fmt::format("--grid: no point of the grid loads; the first ({}): {}",
                                  fmt::join(grid.assignments(0), " "), points[0].error));
  }
  const std::vector<int> ok_idx = grid.value_indices(first_ok);
  for (size_t k = 0; k < axes.size(); ++k)
    for (int v = 0; v < static_cast<int>(axes[k].values.size()); ++v) {
      if (used[k][v] >= 0) continue;
      // The index of the point with ok_idx's values but v on axis k (row-major).
      int64_t i = 0;
      for (size_t a = 0; a < axes.size(); ++a)
        i = i * static_cast<int64_t>(axes[a].values.size()) + (a == k ? v : ok_idx[a]);
      throw ConfigError(fmt::format("--grid {}: value \"{}\" fits no point of the grid ({}): {}", axes[k].spec,
                                    axes[k].values[v], fmt::join(grid.assignments(i), " "), points[i].error));
    }

  // Inputs as they resolved, taken for a point that failed from the first point
  // that loaded with the same value (so a column has one type).
  for (GridPoint& p : points) {
    const std::vector<int> idx = grid.value_indices(p.index);
    for (size_t k = 0; k < axes.size(); ++k) {
      const GridPoint& from = points[used[k][idx[k]]];
      nlohmann::json v = resolved_value(*from.experiment, axes[k].key);
      p.inputs.push_back(v.is_null() ? nlohmann::json(axes[k].values[idx[k]]) : std::move(v));
    }
  }
  return points;
}

}  // namespace rm::search
