// Hand-built Kineto imports for the replay tests: CPU calls, GPU events,
// launches, synchronizes, NCCL kernels and ProfilerSteps, in microseconds.
#pragma once

#include <string>
#include <vector>

#include "sim/replay/replay_cluster.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/topology/topology.hpp"
#include "traces/kineto.hpp"

namespace rm::replay::test {

struct ImportBuilder {
  traces::KinetoImport imp;
  int64_t next = 0;

  ImportBuilder(const std::vector<int>& ranks, int world) {
    imp.timeline.source = traces::Source::kineto;
    for (int r : ranks) imp.ranks.push_back({r, world, "rank" + std::to_string(r) + ".json", world > 0 ? "nccl" : ""});
  }
  int64_t event(int rank, int stream, const std::string& name, const std::string& cat, double start_us,
                double end_us) {
    traces::Event e;
    e.op = next++;
    e.rank = rank;
    e.stream = stream;
    e.name = name;
    e.category = cat;
    e.start_s = start_us * 1e-6;
    e.end_s = end_us * 1e-6;
    imp.timeline.events.push_back(e);
    return e.op;
  }
  // A CUDA runtime call on CPU thread `thread` of `rank`.
  int64_t cpu(int rank, int thread, const std::string& name, double start_us, double end_us) {
    return event(rank, traces::kKinetoCpuStreamBase + thread, name, "cuda_runtime", start_us, end_us);
  }
  int64_t gpu(int rank, int stream, const std::string& name, double start_us, double end_us,
              const std::string& cat = "kernel") {
    imp.gpu_streams.insert({rank, stream});
    return event(rank, stream, name, cat, start_us, end_us);
  }
  // A kernel and the cudaLaunchKernel that launched it.
  int64_t launched(int rank, int thread, double launch_us, int stream, const std::string& name, double start_us,
                   double end_us) {
    const int64_t l = cpu(rank, thread, "cudaLaunchKernel", launch_us, launch_us + 4);
    const int64_t k = gpu(rank, stream, name, start_us, end_us);
    edge(l, k, traces::EdgeKind::launch);
    return k;
  }
  void edge(int64_t from, int64_t to, traces::EdgeKind kind) { imp.timeline.edges.push_back({from, to, kind}); }
  int64_t nccl(int rank, int stream, double start_us, double end_us, const traces::KinetoCollective& c) {
    const int64_t k = gpu(rank, stream, "ncclKernel_" + c.kind, start_us, end_us);
    imp.collectives[k] = c;
    return k;
  }
  void step(int rank, int thread, int number, double start_us, double end_us) {
    const std::string name = "ProfilerStep#" + std::to_string(number);
    event(rank, traces::kKinetoCpuStreamBase + thread, name, "user_annotation", start_us, end_us);
    imp.steps.push_back({name, number, rank, start_us * 1e-6, end_us * 1e-6});
  }
};

inline traces::KinetoCollective collective(const std::string& kind, int64_t bytes, std::vector<int> ranks,
                                           int64_t seq = 0) {
  traces::KinetoCollective c;
  c.kind = kind;
  c.bytes = bytes;
  c.group_size = static_cast<int>(ranks.size());
  c.group_ranks = std::move(ranks);
  c.process_group = "0";
  c.seq = seq;
  return c;
}

// a100-40g-4x8-hdr (4 nodes of 8: ranks 0 and 8 talk over the NICs), with what-ifs.
inline Cluster cluster(const std::vector<std::string>& sets = {}) {
  return load_cluster(ConfigStore(), "a100-40g-4x8-hdr", sets);
}

}  // namespace rm::replay::test
