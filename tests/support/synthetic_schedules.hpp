// Synthetic schedules with known shapes, for the engines' tests and
// benchmarks: a ring (compute overlapped with a neighbour exchange, as ring
// attention does) and random schedules that are valid by construction.
#pragma once

#include <cstdint>

#include "sim/schedule/schedule.hpp"

namespace rm::engine {

struct RingSpec {
  int ranks = 4;           // rank r on GPU first_gpu + r
  int first_gpu = 0;
  int steps = 4;           // ring steps; steps - 1 exchanges
  double flops = 1e12;     // attn_fwd FLOPs per step and rank
  int64_t bytes = 1 << 20; // each exchange: every rank sends this much to the next
  int all_reduce_every = 0; // > 0: after every this many exchanges, an all_reduce of `bytes`
                            // over all ranks on "comm" (group "world")
};

// Per rank: streams "compute" (0) and "comm" (1). Step k: attn_fwd on compute
// after the receive of step k-1; for k < steps-1 a joined send to r+1 / recv
// from r-1 on comm after the receive of step k-1 (double buffering).
schedule::Schedule ring_schedule(const RingSpec& spec);

struct RandomSpec {
  uint64_t seed = 1;
  int ranks = 6;   // rank r on GPU r
  int ops = 200;   // roughly, compute and communication together
};

// Compute and communication events in one global order, each op depending
// only on ops created before it, so no cycle or deadlock is possible. Mixes
// compute kinds, p2p pairs (some joined pairs) and every collective kind.
schedule::Schedule random_schedule(const RandomSpec& spec);

}  // namespace rm::engine
