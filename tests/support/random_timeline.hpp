// Seeded random Timelines for the round-trip and determinism tests.
#pragma once

#include <random>

#include "traces/timeline.hpp"

namespace rm::traces::testing {

inline Timeline random_timeline(unsigned seed, int events = 200) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  std::uniform_real_distribution<double> t(0.0, 12.5);
  Timeline tl;
  tl.source = static_cast<Source>(pick(5));
  tl.metadata = {{"experiment", "seed-" + std::to_string(seed)}, {"step_time_s", t(rng)}};
  tl.rank_names[0] = "rank 0 (node0 gpu0)";
  tl.stream_names[{0, 1}] = "comm_intra";
  const char* phases[] = {"", "forward", "backward", "recompute"};
  for (int i = 0; i < events; ++i) {
    Event e;
    e.op = pick(4) == 0 ? -1 : pick(100000);
    e.rank = pick(8);
    e.stream = pick(3);
    e.name = pick(2) ? "attn_fwd" : "send \"kv\"\t\\ step";  // exercises escaping
    e.category = pick(2) ? "attn_fwd" : "send";
    e.start_s = t(rng);
    e.end_s = e.start_s + t(rng) * 1e-6 * pick(1000);
    e.layer = pick(37) - 1;
    e.phase = phases[pick(4)];
    e.step = pick(33) - 1;
    e.bytes = pick(2) ? 0 : static_cast<int64_t>(rng() % (int64_t{1} << 40));
    e.flops = pick(2) ? 0.0 : t(rng) * 1e13;
    tl.events.push_back(e);
  }
  // Edges between the events' ops, of every kind, in no particular order.
  for (int i = 0; i < events / 2; ++i) {
    const Event& a = tl.events[static_cast<size_t>(pick(events))];
    const Event& b = tl.events[static_cast<size_t>(pick(events))];
    if (a.op >= 0 && b.op >= 0) tl.edges.push_back({a.op, b.op, static_cast<EdgeKind>(pick(kEdgeKindCount))});
  }
  return tl;
}

}  // namespace rm::traces::testing
