#include <algorithm>
#include <random>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/placement/attention_kind.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/placement/token_partition.hpp"
#include "sim/placement/work_cache.hpp"

namespace rm::placement {
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
    expect_exact_cover(placement::contiguous_partition(S, cp), S);
    expect_exact_cover(placement::zigzag_partition(S, cp), S);
    expect_exact_cover(placement::stripe_partition(S, cp, 128), S);
    expect_exact_cover(placement::stripe_partition(S, cp, 1), S);
  }
  EXPECT_THROW(placement::stripe_partition(1000, 8, 128), std::invalid_argument);
  EXPECT_THROW(placement::zigzag_partition(100, 8), std::invalid_argument);
}

TEST(TokenPartition, ZigzagRankHoldsChunksIAnd2cpMinus1MinusI) {
  auto z = placement::zigzag_partition(16 * 10, 8);  // chunks of 10
  EXPECT_EQ(z[0].tokens().front(), 0);
  EXPECT_EQ(z[0].runs[1].begin, 150);     // chunk 15
  EXPECT_EQ(z[3].runs[0].begin, 30);      // chunk 3
  EXPECT_EQ(z[3].runs[1].begin, 120);     // chunk 12
}

TEST(TokenPartition, StripeDealsChunksRoundRobin) {
  auto s = placement::stripe_partition(32 * 128 * 4, 32, 128);
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
    auto parts = placement::periodic_partition(cp * g * periods, cp, g, rev);
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
  auto rev = placement::balance_periods(work, cp);
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
  auto z = placement::zigzag_partition(160, 4);  // rank 0: [0,20) [140,160)
  auto a = placement::sequence_shard(z[0], 2, 0), b = placement::sequence_shard(z[0], 2, 1);
  EXPECT_EQ(a.tokens().front(), 0);
  EXPECT_EQ(a.size(), 20);
  EXPECT_EQ(b.tokens().front(), 140);
  // Shards of a stripe set stay compact (strided runs, not one run per chunk).
  auto s = placement::stripe_partition(8 * 16 * 32, 8, 16);
  auto sh = placement::sequence_shard(s[3], 4, 2);
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
  placement::DeviceMap dm(p);
  const int64_t chunk = 10, S = 16 * chunk;
  auto ctx = placement::zigzag_partition(S, p.cp);
  std::vector<std::vector<int64_t>> owner(8);
  for (int c = 0; c < p.cp; ++c)
    for (int h = 0; h < p.hp; ++h) {
      std::set<int64_t> chunks;
      for (int64_t t : placement::sequence_shard(ctx[size_t(c)], p.hp, h).tokens()) chunks.insert(t / chunk);
      owner[size_t(dm.gpu(0, h, c, 0))] = {chunks.begin(), chunks.end()};
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

TEST(Placement, HeadShardsReplicateKvWhenHpExceedsKvHeads) {
  Model m;
  m.heads = 16;
  m.kv_heads = 2;
  auto s = placement::head_shard(m, 8, 5);  // 2 query heads: 10, 11 -> kv head 1
  EXPECT_EQ(s.first_head, 10);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.first_kv_head, 1);
  EXPECT_EQ(s.kv_heads, 1);
  EXPECT_TRUE(s.kv_replicated);
  auto t = placement::head_shard(m, 2, 1);  // 8 query heads -> 1 kv head
  EXPECT_EQ(t.kv_heads, 1);
  EXPECT_FALSE(t.kv_replicated);
  m.kv_heads = 16;
  EXPECT_EQ(placement::head_shard(m, 4, 3).kv_heads, 4);
}

TEST(Placement, DeviceMapsAreBijections) {
  for (auto order : {PlacementOrder::head_first, PlacementOrder::context_first}) {
    Parallel p;
    p.dp = 2;
    p.hp = 4;
    p.cp = 8;
    p.placement = order;
    placement::DeviceMap dm(p);
    std::set<int> gpus;
    for (int d = 0; d < 2; ++d)
      for (int h = 0; h < 4; ++h)
        for (int c = 0; c < 8; ++c) gpus.insert(dm.gpu(d, h, c, 0));
    EXPECT_EQ(gpus.size(), 64u);
    EXPECT_EQ(*gpus.rbegin(), 63);
  }
  Parallel p;
  p.hp = 4;
  p.cp = 8;
  placement::DeviceMap hf(p);
  EXPECT_EQ(hf.head_group(0, 1, 0), (std::vector<int>{4, 5, 6, 7}));  // head group on one node
}

// An experiment of `cp` context ranks and ring kind `ring`, no config files needed.
Experiment ring_experiment(int cp, RingKind ring, int window = 1, PlacementOrder order = PlacementOrder::head_first) {
  Experiment e;
  e.source = "exp.json";
  e.parallel.cp = cp;
  e.parallel.ring = ring;
  e.parallel.window = window;
  e.parallel.placement = order;
  return e;
}

topology::Topology four_nodes_of_eight() {
  auto c = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
  return topology::Topology(parse_cluster(JsonReader(c.json, c.source)));
}

std::vector<int> first_gpus(int n) {
  std::vector<int> g(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) g[size_t(i)] = i;
  return g;
}

TEST(AttentionKinds, OneRegisteredKindPerRingKeyAndLocal) {
  std::set<std::string> names;
  for (const auto& k : placement::attention_kinds()) names.insert(std::string(k.name));
  EXPECT_EQ(names, (std::set<std::string>{"local", "ring", "double_ring", "hierarchical"}));
  const topology::Topology topo = four_nodes_of_eight();
  for (RingKind r : {RingKind::ring, RingKind::double_ring, RingKind::hierarchical}) {
    EXPECT_EQ(placement::attention_kind_name(ring_experiment(8, r, 4)), to_string(r));
    EXPECT_EQ(placement::attention_kind_name(ring_experiment(1, r, 1)), "local");
    // Each row's layout holds the group: one ring of one for local, cp ranks otherwise.
    const auto l = placement::make_attention_kind(ring_experiment(8, r, 4))->layout(first_gpus(8), topo);
    EXPECT_EQ(l.outer() * l.inner(), 8) << to_string(r);
    EXPECT_EQ(placement::make_attention_kind(ring_experiment(1, r, 1))->layout(first_gpus(1), topo).rings,
              (std::vector<std::vector<int>>{{0}}));
  }
}

TEST(AttentionKinds, DoubleRingWindowsPlainAndInterleaved) {
  const topology::Topology topo = four_nodes_of_eight();
  auto rings = [&](int cp, int w, PlacementOrder order) {
    return placement::make_attention_kind(ring_experiment(cp, RingKind::double_ring, w, order))
        ->layout(first_gpus(cp), topo)
        .rings;
  };
  EXPECT_EQ(rings(16, 4, PlacementOrder::interleaved),
            (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(rings(8, 4, PlacementOrder::head_first), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(AttentionKinds, HierarchicalRingsAreTheNodes) {
  const auto l = placement::make_attention_kind(ring_experiment(32, RingKind::hierarchical))
                     ->layout(first_gpus(32), four_nodes_of_eight());
  ASSERT_EQ(l.outer(), 4);
  ASSERT_EQ(l.inner(), 8);
  EXPECT_EQ(l.rings[1].front(), 8);
  EXPECT_EQ(l.sources[1][9], 8);   // inner step: from the previous rank on the node
  EXPECT_EQ(l.sources[8][9], 1);   // outer step: the same position one node back
}

TEST(AttentionKinds, LayoutErrorsAreConfigErrorsNamingTheKey) {
  const topology::Topology topo = four_nodes_of_eight();
  auto message = [&](const Experiment& e, int gpus) -> std::string {
    try {
      placement::make_attention_kind(e)->layout(first_gpus(gpus), topo);
    } catch (const ConfigError& err) {
      return err.what();
    }
    return "no error";
  };
  EXPECT_THAT(message(ring_experiment(8, RingKind::double_ring, 3), 8),
              ::testing::StartsWith("exp.json: $.parallel.window: expected a divisor of cp (8), got 3"));
  EXPECT_THAT(message(ring_experiment(12, RingKind::hierarchical), 12),
              ::testing::StartsWith("exp.json: $.parallel.ring: hierarchical needs as many context ranks on every node"));
  EXPECT_THAT(message(ring_experiment(12, RingKind::hierarchical), 12), ::testing::HasSubstr("8 on node 0 and 4 on node 1"));
  EXPECT_EQ(message(ring_experiment(16, RingKind::hierarchical), 16), "no error");
}

TEST(RingLayout, SourcesMoveOneRingPositionPerStepOnRandomLayouts) {
  // Oracle: the ring emitter's movement. Inside a round rank (o, i) receives the
  // block its inner predecessor (o, i-1) held one step before; at a round's start
  // the block its outer predecessor (o-1, i) started the previous round with.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int O = 1 + int(rng() % 5), I = 1 + int(rng() % 6), cp = O * I;
    std::vector<int> perm = first_gpus(cp);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::vector<int>> rings(static_cast<size_t>(O));
    for (int o = 0; o < O; ++o) rings[size_t(o)].assign(perm.begin() + o * I, perm.begin() + (o + 1) * I);
    const auto l = placement::layout_of_rings(rings);
    ASSERT_EQ(l.rings, rings);
    ASSERT_EQ(int(l.sources.size()), cp);
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < I; ++i) {
        const size_t c = size_t(rings[size_t(o)][size_t(i)]);
        const size_t inner_prev = size_t(rings[size_t(o)][size_t((i + I - 1) % I)]);
        const size_t outer_prev = size_t(rings[size_t((o + O - 1) % O)][size_t(i)]);
        EXPECT_EQ(l.sources[0][c], int(c));
        std::set<int> seen;
        for (int k = 0; k < cp; ++k) {
          seen.insert(l.sources[size_t(k)][c]);
          if (k % I != 0) {
            EXPECT_EQ(l.sources[size_t(k)][c], l.sources[size_t(k - 1)][inner_prev]);
          } else if (k > 0) {
            EXPECT_EQ(l.sources[size_t(k)][c], l.sources[size_t(k - I)][outer_prev]);
          }
        }
        EXPECT_EQ(int(seen.size()), cp) << "rank " << c << " misses a block";
      }
    for (const auto& step : l.sources) EXPECT_EQ(std::set<int>(step.begin(), step.end()).size(), size_t(cp));
  }
  EXPECT_EQ(placement::layout_of_rings({{0, 1, 2, 3}}).sources[1], (std::vector<int>{3, 0, 1, 2}));
  EXPECT_THROW(placement::layout_of_rings({{0, 1}, {2}}), std::invalid_argument);
  EXPECT_THROW(placement::layout_of_rings({{0, 1}, {1, 2}}), std::invalid_argument);
  EXPECT_THROW(placement::layout_of_rings({}), std::invalid_argument);
}

TEST(WorkCache, CountsEachPatternAndPartitionOnce) {
  const int64_t S = 4096;
  const auto dense = std::make_shared<const sparsity::HeadPattern>(sparsity::HeadPattern::dense_causal());
  const auto window = std::make_shared<const sparsity::HeadPattern>(sparsity::HeadPattern::sliding_window(300));
  // Two layers of four heads; heads share two pattern objects.
  const sparsity::SparsityModel m("t", 2, 4, S, false, {dense, window, dense, window, window, window, dense, dense});
  Experiment e = ring_experiment(4, RingKind::ring);
  e.workload.seq_len = S;
  e.parallel.stripe_tokens = 64;
  e.model.heads = 4;
  e.model.kv_heads = 4;
  placement::WorkCache cache;
  const sparsity::BlockShape shape{64, 64};
  for (Partition p : {Partition::contiguous, Partition::stripe, Partition::balanced}) {
    e.parallel.partition = p;
    const auto& ranks = cache.partition(p, e, m);
    EXPECT_EQ(&ranks, &cache.partition(p, e, m));
    for (int layer = 0; layer < 2; ++layer) {
      const auto sum = cache.head_rank_pairs(m, layer, placement::head_shard(e.model, 2, 1), ranks, shape);
      std::vector<sparsity::TileCost> want(16);
      for (int h = 2; h < 4; ++h) {
        const auto direct = sparsity::pair_costs(m.head(layer, h), ranks, shape);
        for (size_t i = 0; i < want.size(); ++i) want[i] += direct[i];
      }
      EXPECT_EQ(sum, want) << to_string(p) << " layer " << layer;
    }
  }
  EXPECT_EQ(cache.partition_builds(), 3);
  EXPECT_EQ(cache.pair_cost_builds(), 3 * 2);  // per partition, the two distinct pattern objects
  // An equal partition handed in from outside shares the cached counts.
  cache.pair_costs(*dense, placement::simple_partition(Partition::contiguous, S, 4, 64), shape);
  EXPECT_EQ(cache.pair_cost_builds(), 6);
  cache.pair_costs(*dense, placement::simple_partition(Partition::zigzag, S, 4, 64), shape);
  EXPECT_EQ(cache.pair_cost_builds(), 7);
}

// Heads that are equal but built apart (as index files or budgets can give)
// are counted once: the model merges them, the cache keys by the merged object.
TEST(WorkCache, EqualHeadsBuiltApartAreCountedOnce) {
  const int64_t S = 8192;
  std::mt19937_64 rng(5);
  auto head = [&](int variant) {
    std::mt19937_64 r{static_cast<uint64_t>(variant)};  // the same variant gives the same mask
    std::vector<sparsity::Interval> cols{{0, 30}}, diags{{0, 100}};
    for (int i = 0; i < 20; ++i) {
      const auto v = int64_t(r() % uint64_t(S)), d = int64_t(r() % uint64_t(S));
      cols.push_back({v, v + 1});
      diags.push_back({d, d + 1});
    }
    return std::make_shared<const sparsity::HeadPattern>(
        sparsity::HeadPattern::vertical_slash(sparsity::IntervalSet(cols), sparsity::IntervalSet(diags)));
  };
  std::vector<std::shared_ptr<const sparsity::HeadPattern>> heads;
  std::vector<int> variant;
  for (int i = 0; i < 16; ++i) {
    variant.push_back(int(rng() % 5));
    heads.push_back(head(variant.back()));  // 16 objects, at most 5 masks
  }
  const sparsity::SparsityModel m("t", 2, 8, S, true, heads);
  const int masks = int(std::set<int>(variant.begin(), variant.end()).size());
  EXPECT_EQ(m.distinct_heads(), masks);
  Experiment e = ring_experiment(4, RingKind::ring);
  e.workload.seq_len = S;
  e.parallel.stripe_tokens = 128;
  e.parallel.partition = Partition::stripe;
  e.model.heads = 8;
  e.model.kv_heads = 8;
  placement::WorkCache cache;
  const auto& ranks = cache.partition(Partition::stripe, e, m);
  for (int layer = 0; layer < 2; ++layer) {
    const auto sum = cache.head_rank_pairs(m, layer, placement::head_shard(e.model, 1, 0), ranks, {});
    std::vector<sparsity::TileCost> want(16);
    for (int h = 0; h < 8; ++h) {  // the plain path: every head's own object, counted from scratch
      const auto direct = sparsity::pair_costs(*heads[size_t(layer * 8 + h)], ranks, {});
      for (size_t i = 0; i < want.size(); ++i) want[i] += direct[i];
    }
    EXPECT_EQ(sum, want) << "layer " << layer;
  }
  EXPECT_EQ(cache.pair_cost_builds(), masks);  // not 16

  // With no room to keep matrices: the same sums, each distinct mask of a
  // shard counted once per call, nothing kept.
  placement::WorkCache tight;
  tight.set_matrix_budget(0);
  const auto& r2 = tight.partition(Partition::stripe, e, m);
  int64_t per_call = 0;
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(tight.head_rank_pairs(m, layer, placement::head_shard(e.model, 1, 0), r2, {}),
              cache.head_rank_pairs(m, layer, placement::head_shard(e.model, 1, 0), ranks, {}));
    per_call += int64_t(std::set<int>(variant.begin() + layer * 8, variant.begin() + layer * 8 + 8).size());
  }
  EXPECT_EQ(tight.pair_cost_builds(), per_call);
  EXPECT_EQ(tight.matrix_bytes(), 0);
  EXPECT_EQ(cache.pair_cost_builds(), masks);  // the kept matrices answered the second round
}

}  // namespace
}  // namespace rm::placement
