// The planner's view of GPU memory: whether a layout fits, by how much it
// misses, and its peak — from the memory model (sim/memory/memory_model.hpp)
// when this build has it. Until that model is part of the build the planner
// cannot prune by memory and says so (`modelled` false), rather than guess.
#pragma once

#include "sim/config/experiment.hpp"

namespace rm::search {

struct MemoryFit {
  bool modelled = false;  // false: no memory model in this build; nothing is pruned
  double peak_GB = 0;     // per GPU, GB = 1e9 bytes
  double capacity_GB = 0;
  bool oom = false;
  double shortfall_GB() const { return oom ? peak_GB - capacity_GB : 0.0; }
};

MemoryFit memory_fit(const Experiment& e);

}  // namespace rm::search
