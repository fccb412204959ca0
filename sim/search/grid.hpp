// The grid of a sweep: `--grid KEY=V1,V2,...` axes over any experiment key,
// their cross product (the last axis varies fastest), and each point's
// experiment loaded through rm::apply_override / load_experiment after the
// sweep's --set overrides. A value that no point of the grid can use (a key
// that does not exist, a value of the wrong type or out of range, a layout
// that fits no combination) is bad input for the whole sweep: a one-line
// ConfigError naming the --grid, the key and the value. A point that fails
// only in its combination (cp = 16 with hp = 2 on 16 GPUs) keeps its error
// and the sweep goes on. docs/sweep.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"

namespace rm::search {

struct GridAxis {
  std::string key;                  // an experiment key path, e.g. "parallel.cp"
  std::vector<std::string> values;  // as written, e.g. "128k"
  std::string spec;                 // the whole "KEY=V1,V2", for error messages
};

// Parses "KEY=V1,V2,...". Commas inside [...], {...} or "..." do not split,
// so a value may be a JSON array or object. Throws ConfigError "--grid SPEC: ..."
// for a missing '=', an empty key or value, or a value given twice.
GridAxis parse_grid_axis(const std::string& spec);

// The largest grid a sweep accepts: its points are all loaded up front, each
// with its resolved experiment JSON (kilobytes), and each costs a simulation.
inline constexpr int64_t kMaxGridPoints = 100'000;

class Grid {
 public:
  // Throws ConfigError for no axes, a key on two axes, or more than kMaxGridPoints points.
  explicit Grid(std::vector<GridAxis> axes);
  const std::vector<GridAxis>& axes() const { return axes_; }
  int64_t size() const { return size_; }
  // Which value of each axis point i takes (row-major: the last axis fastest).
  std::vector<int> value_indices(int64_t point) const;
  // The "KEY=VALUE" overrides of point i, one per axis.
  std::vector<std::string> assignments(int64_t point) const;

 private:
  std::vector<GridAxis> axes_;
  int64_t size_ = 1;
};

struct GridPoint {
  int64_t index = 0;
  std::vector<nlohmann::json> inputs;     // per axis: the value as the experiment resolved it (131072 for "128k")
  std::optional<Experiment> experiment;   // empty when this point's combination does not load
  std::string error;                      // why, when it does not
};

// Loads every point: `file` (empty = the default experiment), then `sets`, then
// the point's assignments. Throws ConfigError for a grid value that no point can
// use, naming the --grid, the value and the first point's error.
std::vector<GridPoint> load_grid(const Grid& grid, const ConfigStore& store, const std::string& file,
                                 const std::vector<std::string>& sets);

// The value at a key path of an experiment as it resolved: from summary_json
// (sizes as integers, named parts by name) or else the inlined experiment JSON;
// null when neither has the key as a scalar.
nlohmann::json resolved_value(const Experiment& e, const std::string& key);

}  // namespace rm::search
