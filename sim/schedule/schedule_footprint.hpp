// What a process holding a whole Schedule needs in memory, from its op and rank
// counts alone — known from a file before its ops are allocated (OpCountCheck in
// schedule_file.hpp), so `simulate --schedule` and ringmaster-run refuse a file
// too large for the machine before reading its ops. Upper bounds calibrated on
// peak RSS (docs/generators.md, "Memory estimate"): 591 bytes per op measured for
// a simulation (the Schedule, the engine's per-op state, the Timeline's events,
// the report's per-op data), here with ~30% to spare; the generators' estimates
// (generate/footprint.hpp) add their own terms to the same figures.
#pragma once

#include <cstdint>

namespace rm::schedule {

struct Footprint {
  int64_t ops = 0;
  int64_t bytes = 0;  // upper bound of the peak resident memory
};

inline constexpr int64_t kSimulateBytesPerOp = 800;
inline constexpr int64_t kBytesPerRank = 64 << 10;  // streams, groups, buffers, ready lists
inline constexpr int64_t kBaseBytes = 96ll << 20;   // the binary, configs, patterns, allocator slack (49 MB measured)

// A Schedule of `ops` ops over `ranks` ranks, held and simulated (or executed).
inline Footprint estimate_schedule_footprint(int64_t ops, int64_t ranks) {
  return {ops, kBaseBytes + ops * kSimulateBytesPerOp + ranks * kBytesPerRank};
}

}  // namespace rm::schedule
