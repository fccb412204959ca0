// run_simgrid and run_simgrid_reference (simgrid_engine.hpp) on the SimGrid
// module, loaded on the first call: libringmaster_simgrid.so in the folder of
// the running executable (build/bin holds the CLI, the tests and the
// benchmarks), or the file $RINGMASTER_SIMGRID_MODULE names.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "sim/engine/simgrid_engine.hpp"

namespace rm::engine {

namespace {

using Entry = void (*)(const SimGridCall&);

std::string module_path() {
  if (const char* env = std::getenv("RINGMASTER_SIMGRID_MODULE"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ((ec ? std::filesystem::path(".") : exe.parent_path()) / "libringmaster_simgrid.so").string();
}

Entry entry() {
  static std::mutex mu;
  static std::map<std::string, Entry> loaded;  // by path; a failed load is retried (and reported) by the next call
  std::lock_guard lock(mu);
  const std::string path = module_path();
  if (const auto it = loaded.find(path); it != loaded.end()) return it->second;
  // RTLD_NOW: a symbol the module needs and the executable lacks fails here, not mid-run.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) throw std::runtime_error(fmt::format("simgrid engine: cannot load {}: {}", path, ::dlerror()));
  void* f = ::dlsym(h, kSimGridEntry);
  if (f == nullptr) throw std::runtime_error(fmt::format("simgrid engine: {} has no {}", path, kSimGridEntry));
  return loaded[path] = reinterpret_cast<Entry>(f);
}

OpTimes call(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
             const cost::CostModel& m, const FixedDurations* fixed, bool reference) {
  OpTimes out;
  entry()({&s, &plan, &t, &m, fixed, reference, &out});
  return out;
}

}  // namespace

OpTimes run_simgrid(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m) {
  return call(s, schedule::RunPlan(s), t, m, nullptr, false);
}

OpTimes run_simgrid(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                    const cost::CostModel& m, const FixedDurations* fixed_compute_s) {
  return call(s, plan, t, m, fixed_compute_s, false);
}

OpTimes run_simgrid_reference(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m) {
  return call(s, schedule::RunPlan(s), t, m, nullptr, true);
}

}  // namespace rm::engine
