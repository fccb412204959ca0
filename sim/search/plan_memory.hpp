// The planner's view of GPU memory: whether a layout fits, by how much it
// misses, and its peak, from the memory model (sim/memory/memory_model.hpp).
#pragma once

#include "sim/config/experiment.hpp"

namespace rm::search {

struct MemoryFit {
  double peak_GB = 0;     // per GPU, GB = 1e9 bytes
  double capacity_GB = 0;
  bool oom = false;
  double shortfall_GB() const { return oom ? peak_GB - capacity_GB : 0.0; }
};

MemoryFit memory_fit(const Experiment& e);

}  // namespace rm::search
