#include "sim/search/plan_memory.hpp"

#include "sim/memory/memory_model.hpp"

namespace rm::search {

MemoryFit memory_fit(const Experiment& e) {
  const memory::MemoryReport r = memory::estimate_memory(e);
  MemoryFit f;
  f.peak_GB = r.peak_GB();
  f.capacity_GB = r.capacity_GB();
  f.oom = r.oom;
  return f;
}

}  // namespace rm::search
