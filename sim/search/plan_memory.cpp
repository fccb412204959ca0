#include "sim/search/plan_memory.hpp"

#if __has_include("sim/memory/memory_model.hpp")
#include "sim/memory/memory_model.hpp"
#define RM_PLAN_HAS_MEMORY_MODEL 1
#endif

namespace rm::search {

MemoryFit memory_fit(const Experiment& e) {
  MemoryFit f;
#ifdef RM_PLAN_HAS_MEMORY_MODEL
  const memory::MemoryReport r = memory::estimate_memory(e);
  f.modelled = true;
  f.peak_GB = r.peak_GB();
  f.capacity_GB = r.capacity_GB();
  f.oom = r.oom;
#else
  f.capacity_GB = e.cluster.gpu.memory_GB;
#endif
  return f;
}

}  // namespace rm::search
