// The memory model's cost per estimate (sim/memory/memory_model.hpp), which the
// planner pays for every candidate before it generates anything: the default
// experiment (hierarchical ring, dynamic pattern), LoongTrain's (2D double
// ring) and a 4,096-GPU variant, each estimated many times in one run. One table.
//   build/bin/bench_memory
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/config/config_store.hpp"
#include "sim/memory/memory_model.hpp"

namespace {
using namespace rm;
using clock_type = std::chrono::steady_clock;
}  // namespace

int main() {
  struct Case {
    const char* name;
    std::string file;
    std::vector<std::string> sets;
  };
  const std::vector<Case> cases{
      {"default (MTraining, 32 GPUs)", "", {}},
      {"LoongTrain 7B 1M (64 GPUs)", "loongtrain-llama2-7b-1m", {}},
      {"4,096 GPUs, 4M tokens, dp 32 x cp 128", "",
       {"cluster.nodes=512", "workload.seq_len=4M", "parallel.dp=32", "parallel.cp=128"}},
  };
  fmt::print("{:<40} {:>12} {:>10} {:>8}\n", "experiment", "us/estimate", "peak GB", "oom");
  int64_t checksum = 0;
  for (const Case& c : cases) {
    const Experiment e = load_experiment(ConfigStore{}, c.file, c.sets);
    constexpr int kRuns = 100000;
    const auto t0 = clock_type::now();
    memory::MemoryReport r;
    for (int i = 0; i < kRuns; ++i) {
      r = memory::estimate_memory(e);
      checksum += r.peak_bytes;
    }
    const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / kRuns;
    fmt::print("{:<40} {:>12.2f} {:>10.2f} {:>8}\n", c.name, us, r.peak_GB(), r.oom ? "yes" : "no");
  }
  fmt::print("(checksum {})\n", checksum);
  return 0;
}
