// Before/after equality of the analytic engine: its op times, bit for bit, on
// generated schedules (random ones with every collective kind on 6 and 32
// ranks, so flows share NICs and the switch; rings with all-reduces) equal
// the digests the engine gave before issue 9's speed work (commit 38740fe,
// computed by this file's cases against that tree). Speed work must change
// no answer: a digest that moves is a regression, not a golden to update.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/config/config_store.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "tests/support/synthetic_schedules.hpp"

namespace rm::engine {
namespace {

// FNV-1a over the bit patterns of every start and end, in op order.
uint64_t digest(const OpTimes& t) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&](double x) {
    uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    for (int i = 0; i < 8; ++i) h = (h ^ ((b >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (size_t i = 0; i < t.start.size(); ++i) add(t.start[i]), add(t.end[i]);
  return h;
}

struct Golden {
  const char* name;
  schedule::Schedule (*make)();
  uint64_t digest;
};

const Golden kGolden[] = {
    {"random seed 1, 6 ranks", [] { return random_schedule({1, 6, 400}); }, 0x53a85d8757c8c36full},
    {"random seed 2, 6 ranks", [] { return random_schedule({2, 6, 400}); }, 0xcfe23742fa3d1bebull},
    {"random seed 3, 32 ranks", [] { return random_schedule({3, 32, 3000}); }, 0xfa647cc4539b6bebull},
    {"random seed 4, 32 ranks", [] { return random_schedule({4, 32, 3000}); }, 0xf93a9d8a7253c545ull},
    {"random seed 5, 17 ranks", [] { return random_schedule({5, 17, 2000}); }, 0x29f3ed3524636300ull},
    {"ring 32 x 40, all_reduce every 7", [] { return ring_schedule({32, 0, 40, 1e11, 16 << 20, 7}); }, 0x6db200be466fbb4bull},
    {"ring 12 x 30 from gpu 5", [] { return ring_schedule({12, 5, 30, 3e10, 1 << 22, 0}); }, 0x9a4c927c5f88321full},
};

TEST(EngineGolden, OpTimesEqualThePreIssue9Engine) {
  auto cfg = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
  const Cluster cluster = parse_cluster(JsonReader(cfg.json, cfg.source));
  const topology::Topology topo(cluster);
  const cost::CostModel model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu));
  for (const Golden& g : kGolden) {
    const auto s = g.make();
    const OpTimes t = run_analytic(s, topo, model);
    EXPECT_EQ(digest(t), g.digest) << g.name << ": 0x" << std::hex << digest(t);
    // The Timeline carries the same times, stream by stream in canonical order.
    const auto tl = to_timeline(s, t, traces::Source::analytic);
    auto sorted = tl;
    sorted.sort();
    EXPECT_EQ(sorted.events, tl.events) << g.name;
  }
}

}  // namespace
}  // namespace rm::engine
