#include "runtime/launch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "runtime/buffer_instances.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cpu_compute.hpp"
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
#include "runtime/cuda/cuda_backend.hpp"
#endif
#include "runtime/inputs.hpp"
#include "runtime/layouts.hpp"
#include "runtime/tensor_store.hpp"
#include "runtime/world.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule_file.hpp"

namespace rm::runtime {

namespace {

// Memory this process may use: what the machine has available, shared by the ranks on it.
int64_t available_bytes(int local_ranks) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024 / std::max(1, local_ranks);
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return int64_t(pages) * int64_t(page) / std::max(1, local_ranks);
}

double gb(int64_t bytes) { return double(bytes) / 1e9; }

// Everything a rank builds before it runs; any throw here is bad input.
struct Prepared {
  schedule::Schedule s;
  Experiment e;
  std::unique_ptr<schedule::RunPlan> plan;
  std::unique_ptr<BufferInstances> instances;
  std::unique_ptr<Layouts> layouts;
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<CpuCompute> compute;
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
  std::unique_ptr<CudaBackend> cuda;  // --backend cuda: in place of store and compute
#endif
};

void prepare(const LaunchOptions& o, const World& world, Prepared& p) {
#ifndef RINGMASTER_HAVE_CUDA_BACKEND
  if (o.backend == "cuda")
    throw ConfigError("--backend cuda: this ringmaster-run was built without the cuda backend (CUDA and NCCL not found at build time)");
#endif
  if (o.emulate_ranks > 0 && o.backend != "cuda") throw ConfigError("--emulate-ranks needs --backend cuda");
  p.s = schedule::read_schedule(o.schedule);
  if (o.emulate_ranks == 0 && int(p.s.ranks.size()) != world.size())
    throw ConfigError(fmt::format("{}: the Schedule has {} ranks but {} processes were started (mpirun -np {})", o.schedule,
                                  p.s.ranks.size(), world.size(), p.s.ranks.size()));
  p.e = parse_experiment(p.s.experiment, o.schedule + " (its experiment)", "", ConfigStore{});
  p.plan = std::make_unique<schedule::RunPlan>(p.s);
  p.instances = std::make_unique<BufferInstances>(p.s);
  p.layouts = std::make_unique<Layouts>(p.s, p.plan->match, p.e.workload.batch, p.e.model.head_dim);
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
  if (o.backend == "cuda") {
    p.cuda = std::make_unique<CudaBackend>(CudaInputs{p.s, p.e, *p.plan, *p.instances, *p.layouts}, world, o);
    return;
  }
#endif
  const int64_t need = memory_needed(p.s, world.rank(), p.instances->layers());
  const int64_t have = available_bytes(world.local_size());
  if (need > have)
    throw ConfigError(fmt::format("{}: rank {} needs {:.2f} GB for its buffers; this machine has {:.2f} GB available per rank "
                                  "({} ranks on it)",
                                  o.schedule, world.rank(), gb(need), gb(have), world.local_size()));
  p.store = std::make_unique<TensorStore>(p.s, world.rank(), p.instances->layers());
  p.compute = std::make_unique<CpuCompute>(p.s, p.e, *p.instances, *p.store);
  p.compute->prepare();
}

// Rank 0 prints the first rank's error (every rank returns 2); collective.
int refuse_together(const World& world, const std::string& error) {
  const auto all = world.gather(error);
  if (world.rank() == 0)
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) {
        std::fprintf(stderr, "ringmaster-run: error: %s%s\n", all[r].c_str(),
                     r == 0 ? "" : fmt::format(" (rank {})", r).c_str());
        break;
      }
  return 2;
}

}  // namespace

int launch(const LaunchOptions& o, int* argc, char*** argv) {
  World world(argc, argv);
  Prepared p;
  std::string error;
  try {
    prepare(o, world, p);
  } catch (const std::bad_alloc&) {
    error = fmt::format("{}: rank {}: out of memory while allocating its buffers", o.schedule, world.rank());
  } catch (const std::exception& x) {
    error = x.what();
  }
  if (!world.all(error.empty())) return refuse_together(world, error);
#ifdef RINGMASTER_HAVE_CUDA_BACKEND
  if (p.cuda) return run_cuda(o, world, *p.cuda);
#endif

  try {
    world.make_group_comms(p.s);
    seed_inputs(p.s, *p.layouts, *p.store, o.seed);
    CpuBackend backend(p.s, *p.plan, *p.layouts, *p.instances, *p.store, *p.compute, world, o.stall_timeout_s);
    world.barrier();
    for (int i = 0; i < o.warmup; ++i) {
      backend.run_once();
      world.barrier();
    }
    std::vector<std::vector<OpTime>> timed;
    for (int i = 0; i < o.iters; ++i) {
      timed.push_back(backend.run_once());
      world.barrier();
    }
    // Per iteration, this rank's span; rank 0 prints the slowest rank's.
    std::string spans;
    for (const auto& it : timed) {
      double lo = 1e300, hi = -1e300;
      for (const auto& t : it) lo = std::min(lo, t.start_s), hi = std::max(hi, t.end_s);
      spans += fmt::format("{} ", it.empty() ? 0.0 : hi - lo);
    }
    const auto all = world.gather(spans);
    if (world.rank() == 0) {
      std::vector<double> step(size_t(o.iters), 0.0);
      for (const auto& s : all) {
        std::istringstream in(s);
        for (int i = 0; i < o.iters; ++i) {
          double v = 0;
          in >> v;
          step[size_t(i)] = std::max(step[size_t(i)], v);
        }
      }
      std::sort(step.begin(), step.end());
      std::printf("ringmaster-run: %zu ranks, %d iterations: median step %.6f s (min %.6f, max %.6f)\n", p.s.ranks.size(),
                  o.iters, step[step.size() / 2], step.front(), step.back());
    }
  } catch (const std::exception& x) {
    std::fprintf(stderr, "ringmaster-run: rank %d: %s\n", world.rank(), x.what());
    std::fflush(stderr);
    world.abort(3);
  }
  return 0;
}

}  // namespace rm::runtime
