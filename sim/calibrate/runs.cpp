#include "sim/calibrate/runs.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/compare/compare.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/kineto.hpp"
#include "traces/text_file.hpp"

namespace rm::calibrate {

namespace {

// A PyTorch profiler trace is the likeliest wrong file: say what it is and what reads it.
void refuse_kineto(const std::string& path) {
  std::string text;
  try {
    text = traces::read_text_file(path);
  } catch (const std::exception&) {
    return;  // the reader's own error says why
  }
  if (traces::looks_like_kineto(text))
    throw ConfigError(fmt::format("{}: this is a PyTorch profiler (Kineto) trace; calibrate reads the measured "
                                  "Timelines ringmaster-run --trace writes (see `ringmaster replay` for Kineto traces)",
                                  path));
}

}  // namespace

Run load_run(const std::string& schedule_path, const std::string& measured_path, const ConfigStore& store) {
  Run r;
  r.name = measured_path;
  try {
    auto loaded = pipeline::load_schedule_file(schedule_path, store);
    r.schedule = std::move(loaded.schedule);
    r.experiment = std::move(loaded.experiment);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(e.what());  // the readers name the file
  }
  try {
    r.measured = traces::read_chrome_trace(measured_path);
    check_run(r);
  } catch (const std::exception& e) {
    refuse_kineto(measured_path);
    if (dynamic_cast<const ConfigError*>(&e)) throw;
    throw ConfigError(e.what());
  }
  return r;
}

void check_run(const Run& r) {
  const auto& m = r.measured.metadata;
  if (!m.is_object() || !m.contains("schedule_hash") || !m["schedule_hash"].is_string())
    throw ConfigError(fmt::format("{}: no metadata.schedule_hash (expected a measured Timeline from ringmaster-run --trace)",
                                  r.name));
  const std::string want = schedule::schedule_hash(r.schedule);
  if (m["schedule_hash"].get<std::string>() != want)
    throw ConfigError(fmt::format("{}: metadata.schedule_hash is {}, but its Schedule's hash is {} (measured from another Schedule)",
                                  r.name, m["schedule_hash"].get<std::string>(), want));
  // Each event on an op of the Schedule, on its rank, once; edges on its ops (compare's check, one owner).
  compare::check_against_schedule(r.schedule, "its Schedule", r.measured, r.name);
  std::vector<bool> seen(r.schedule.ops.size(), false);
  for (const traces::Event& e : r.measured.events) {
    if (e.op < 0) continue;
    if (!(std::isfinite(e.start_s) && std::isfinite(e.end_s) && e.end_s >= e.start_s))
      throw ConfigError(fmt::format("{}: the event of {} has start {} and end {} (expected finite, end >= start)",
                                    r.name, schedule::describe(r.schedule, e.op), e.start_s, e.end_s));
    seen[size_t(e.op)] = true;
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      throw ConfigError(fmt::format("{}: {} has no event (expected one: a measured Timeline holds every op once)",
                                    r.name, schedule::describe(r.schedule, schedule::OpId(i))));
}

std::vector<std::pair<std::string, std::string>> runs_in_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(fmt::format("--runs {}: not a folder", dir));
  std::map<std::string, std::pair<std::string, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    for (const char* suffix : {".schedule.json", ".schedule.json.gz"})
      if (file.size() > std::string_view(suffix).size() && file.ends_with(suffix))
        found[file.substr(0, file.size() - std::string_view(suffix).size())].first = entry.path().string();
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [name, pair] : found) {
    for (const char* suffix : {".measured.json", ".measured.json.gz"})
      if (const fs::path p = fs::path(dir) / (name + suffix); fs::exists(p)) pair.second = p.string();
    if (pair.second.empty())
      throw ConfigError(fmt::format("--runs {}: {} has no {}.measured.json[.gz] beside it", dir, pair.first, name));
    out.push_back(pair);
  }
  if (out.empty()) throw ConfigError(fmt::format("--runs {}: no NAME.schedule.json[.gz] files in it", dir));
  return out;
}

double measured_step_s(const traces::Timeline& t) {
  const auto& m = t.metadata;
  if (m.is_object() && m.contains("iteration_s") && m["iteration_s"].is_object() &&
      m["iteration_s"].contains("median") && m["iteration_s"]["median"].is_number())
    return m["iteration_s"]["median"].get<double>();
  return t.makespan_s();
}

std::vector<size_t> holdout_indices(size_t n, double fraction, uint64_t seed) {
  if (!(fraction >= 0 && fraction < 1)) throw std::invalid_argument("holdout: expected a fraction in [0, 1)");
  if (n < 2 || fraction == 0) return {};
  const size_t k = std::clamp<size_t>(static_cast<size_t>(std::llround(fraction * double(n))), 1, n - 1);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  // Fisher-Yates with a plain modulo: std::shuffle and the distributions differ between libraries.
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[static_cast<size_t>(rng() % (i + 1))]);
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace rm::calibrate
