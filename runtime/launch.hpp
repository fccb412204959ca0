// One rank's whole run of ringmaster-run: load and check the Schedule, agree
// with every other rank that it can start (or refuse together with one line),
// allocate and seed the tensors, optionally --check against the reference,
// run the warm-up and timed iterations, and hand the samples to rank 0 for the
// measured Timeline. main.cpp parses the flags; this does the rest.
#pragma once

#include <cstdint>
#include <string>

namespace rm::runtime {

struct LaunchOptions {
  std::string schedule;
  std::string backend = "cpu";
  bool check = false;
  int iters = 5;
  int warmup = 1;
  std::string trace;
  uint64_t seed = 1;
  double check_bound = 2e-2;
  double stall_timeout_s = 20.0;
  int emulate_ranks = 0;
  bool json = false;
  double max_memory_GB = 0;  // 0: what the machine has available, shared by its ranks
  std::string inject_fault;  // "RANK:OP:fail" or "RANK:OP:hang" (tests)
};

// Returns the process exit code (docs/runtime.md); MPI is initialised and finalised here.
int launch(const LaunchOptions& o, int* argc, char*** argv);

}  // namespace rm::runtime
