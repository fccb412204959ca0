#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/placement/token_partition.hpp"

namespace rm {
namespace {

// Every token exactly once, every rank the same count.
void expect_exact_cover(const std::vector<TokenSet>& parts, int64_t S) {
  std::vector<int> seen(static_cast<size_t>(S), 0);
  for (const auto& p : parts) {
    EXPECT_EQ(p.size(), S / int64_t(parts.size()));
    for (int64_t t : p.tokens()) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, S);
      ++seen[size_t(t)];
    }
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
}

TEST(TokenPartition, NamedPartitionsCoverExactly) {
  for (int cp : {1, 2, 4, 8, 16}) {
    const int64_t S = 4096;
    expect_exact_cover(contiguous_partition(S, cp), S);
    expect_exact_cover(zigzag_partition(S, cp), S);
    expect_exact_cover(stripe_partition(S, cp, 128), S);
    expect_exact_cover(stripe_partition(S, cp, 1), S);
  }
  EXPECT_THROW(stripe_partition(1000, 8, 128), std::invalid_argument);
  EXPECT_THROW(zigzag_partition(100, 8), std::invalid_argument);
}

TEST(TokenPartition, ZigzagRankHoldsChunksIAnd2cpMinus1MinusI) {
  auto z = zigzag_partition(16 * 10, 8);  // chunks of 10
  EXPECT_EQ(z[0].tokens().front(), 0);
  EXPECT_EQ(z[0].runs[1].begin, 150);     // chunk 15
  EXPECT_EQ(z[3].runs[0].begin, 30);      // chunk 3
  EXPECT_EQ(z[3].runs[1].begin, 120);     // chunk 12
}

TEST(TokenPartition, StripeDealsChunksRoundRobin) {
  auto s = stripe_partition(32 * 128 * 4, 32, 128);
  auto t = s[5].tokens();
  EXPECT_EQ(t[0], 5 * 128);
  EXPECT_EQ(t[128], (32 + 5) * 128);  // next period
  EXPECT_EQ(s[5].runs.size(), 1u);    // one strided run
}

TEST(TokenPartition, PeriodicPartitionCoversForAnyDirections) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    int cp = 1 << (rng() % 4);
    int64_t g = 1 + rng() % 16, periods = 1 + rng() % 12;
    std::vector<bool> rev(static_cast<size_t>(periods));
    for (size_t i = 0; i < rev.size(); ++i) rev[i] = rng() % 2;
    auto parts = periodic_partition(cp * g * periods, cp, g, rev);
    expect_exact_cover(parts, cp * g * periods);
    // Rank r's chunk in period p sits at slot r or cp-1-r.
    for (int r = 0; r < cp; ++r) {
      auto t = parts[size_t(r)].tokens();
      for (int64_t p = 0; p < periods; ++p) {
        int64_t slot = rev[size_t(p)] ? cp - 1 - r : r;
        EXPECT_EQ(t[size_t(p * g)], p * cp * g + slot * g);
      }
    }
  }
}

TEST(TokenPartition, BalancePeriodsEvensOutLinearGrowth) {
  // Work growing along the sequence (causal): dealing every period forward leaves the
  // last rank heaviest; the greedy alternation brings max/mean close to 1.
  const int cp = 8, periods = 16;
  std::vector<double> work(static_cast<size_t>(cp * periods));
  for (size_t i = 0; i < work.size(); ++i) work[i] = double(i + 1);
  auto rev = balance_periods(work, cp);
  std::vector<double> load(cp, 0), plain(cp, 0);
  for (int p = 0; p < periods; ++p)
    for (int r = 0; r < cp; ++r) {
      load[size_t(r)] += work[size_t(p * cp + (rev[size_t(p)] ? cp - 1 - r : r))];
      plain[size_t(r)] += work[size_t(p * cp + r)];
    }
  auto ratio = [](const std::vector<double>& l) {
    double mx = *std::max_element(l.begin(), l.end()), sum = 0;
    for (double x : l) sum += x;
    return mx / (sum / double(l.size()));
  };
  EXPECT_LT(ratio(load), 1.0 + 1e-12);  // 16 periods alternate perfectly
  EXPECT_GT(ratio(plain), 1.05);
}

TEST(TokenPartition, SequenceShardSplitsLocalOrder) {
  auto z = zigzag_partition(160, 4);  // rank 0: [0,20) [140,160)
  auto a = sequence_shard(z[0], 2, 0), b = sequence_shard(z[0], 2, 1);
  EXPECT_EQ(a.tokens().front(), 0);
  EXPECT_EQ(a.size(), 20);
  EXPECT_EQ(b.tokens().front(), 140);
  // Shards of a stripe set stay compact (strided runs, not one run per chunk).
  auto s = stripe_partition(8 * 16 * 32, 8, 16);
  auto sh = sequence_shard(s[3], 4, 2);
  EXPECT_EQ(sh.size(), s[3].size() / 4);
  EXPECT_EQ(sh.runs.size(), 1u);
  auto all = s[3].tokens();
  auto part = sh.tokens();
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + std::ptrdiff_t(all.size() / 2)));
}

// LoongTrain's published chunk owners for hp = 2, cp = 4 (zigzag over 2*sp = 16 chunks).
std::vector<std::vector<int64_t>> chunk_owners(PlacementOrder order) {
  Parallel p;
  p.hp = 2;
  p.cp = 4;
  p.placement = order;
  DeviceMap dm(p);
  const int64_t chunk = 10, S = 16 * chunk;
  auto ctx = zigzag_partition(S, p.cp);
  std::vector<std::vector<int64_t>> owner(8);
  for (int c = 0; c < p.cp; ++c)
    for (int h = 0; h < p.hp; ++h) {
      std::set<int64_t> chunks;
      for (int64_t t : sequence_shard(ctx[size_t(c)], p.hp, h).tokens()) chunks.insert(t / chunk);
      owner[size_t(dm.gpu(0, h, c))] = {chunks.begin(), chunks.end()};
    }
  return owner;
}

TEST(Placement, LoongTrainHeadFirstChunkMap) {
  auto o = chunk_owners(PlacementOrder::head_first);
  std::vector<std::vector<int64_t>> want = {{0, 1}, {14, 15}, {2, 3}, {12, 13}, {4, 5}, {10, 11}, {6, 7}, {8, 9}};
  EXPECT_EQ(o, want);
}

TEST(Placement, LoongTrainContextFirstChunkMap) {
  auto o = chunk_owners(PlacementOrder::context_first);
  std::vector<std::vector<int64_t>> want = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {14, 15}, {12, 13}, {10, 11}, {8, 9}};
  EXPECT_EQ(o, want);
}

TEST(Placement, DoubleRingWindows) {
  auto w = double_ring_windows(16, 4, true);
  std::vector<std::vector<int>> want = {{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}};
  EXPECT_EQ(w, want);
  auto plain = double_ring_windows(8, 4, false);
  EXPECT_EQ(plain, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_THROW(double_ring_windows(8, 3, false), std::invalid_argument);
}

TEST(Placement, HeadShardsReplicateKvWhenHpExceedsKvHeads) {
  Model m;
  m.heads = 16;
  m.kv_heads = 2;
  auto s = head_shard(m, 8, 5);  // 2 query heads: 10, 11 -> kv head 1
  EXPECT_EQ(s.first_head, 10);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.first_kv_head, 1);
  EXPECT_EQ(s.kv_heads, 1);
  EXPECT_TRUE(s.kv_replicated);
  auto t = head_shard(m, 2, 1);  // 8 query heads -> 1 kv head
  EXPECT_EQ(t.kv_heads, 1);
  EXPECT_FALSE(t.kv_replicated);
  m.kv_heads = 16;
  EXPECT_EQ(head_shard(m, 4, 3).kv_heads, 4);
}

TEST(Placement, DeviceMapsAreBijections) {
  for (auto order : {PlacementOrder::head_first, PlacementOrder::context_first}) {
    Parallel p;
    p.dp = 2;
    p.hp = 4;
    p.cp = 8;
    p.placement = order;
    DeviceMap dm(p);
    std::set<int> gpus;
    for (int d = 0; d < 2; ++d)
      for (int h = 0; h < 4; ++h)
        for (int c = 0; c < 8; ++c) gpus.insert(dm.gpu(d, h, c));
    EXPECT_EQ(gpus.size(), 64u);
    EXPECT_EQ(*gpus.rbegin(), 63);
  }
  Parallel p;
  p.hp = 4;
  p.cp = 8;
  DeviceMap hf(p);
  EXPECT_EQ(hf.head_group(0, 1), (std::vector<int>{4, 5, 6, 7}));  // head group on one node
}

TEST(Placement, NodeLocalRingsAndRingSourcesVisitEveryBlockOnce) {
  auto c = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
  Topology topo(parse_cluster(JsonReader(c.json, c.source)));
  std::vector<int> group(32);
  for (int i = 0; i < 32; ++i) group[size_t(i)] = i;
  auto h = node_local_rings(group, topo);
  EXPECT_EQ(h.outer_size(), 4);
  EXPECT_EQ(h.inner_size(), 8);
  EXPECT_EQ(h.inner[1].front(), 8);
  for (RingKind kind : {RingKind::ring, RingKind::double_ring, RingKind::hierarchical}) {
    auto src = ring_sources(kind, 32, 4, false, &h);
    for (int r = 0; r < 32; ++r) {
      std::set<int> seen;
      for (int k = 0; k < 32; ++k) seen.insert(src[size_t(k)][size_t(r)]);
      EXPECT_EQ(seen.size(), 32u);
      EXPECT_EQ(src[0][size_t(r)], r);
    }
    // At every step, every KV block is used by exactly one rank.
    for (int k = 0; k < 32; ++k) {
      std::set<int> seen(src[size_t(k)].begin(), src[size_t(k)].end());
      EXPECT_EQ(seen.size(), 32u);
    }
  }
  auto flat = ring_sources(RingKind::ring, 4, 1, false, nullptr);
  EXPECT_EQ(flat[1], (std::vector<int>{3, 0, 1, 2}));  // KV moves r -> r+1
}

}  // namespace
}  // namespace rm
