// Online index building: planted verticals and slashes are found, forced
// entries are kept, budgets and caps hold, and the distributed combine gives
// exactly the single-process index.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kernels/index_builder.hpp"
#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

// Last `nq` queries of a seq_len sequence against all keys, with keys at
// `hot` positions aligned with every query (verticals) and key j made to
// resemble query j + `lag` (a slash at offset lag). KV head 0 (query heads
// 0, 1) has strong verticals, KV head 1 (query heads 2, 3) a strong slash;
// the pattern is planted for the first query head of each group.
struct Planted {
  int hq = 4, hkv = 2, dim = 64;
  std::int32_t seq = 1024, nq = 64, lag = 300;
  std::vector<std::int32_t> hot{40, 517, 900};
  std::vector<float> q, k;
  std::vector<std::int32_t> q_pos, k_pos;

  explicit Planted(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.f, 1.f);
    q_pos = test::iota_pos(seq - nq, nq);
    k_pos = test::iota_pos(0, seq);
    q.resize(static_cast<std::size_t>(hq * nq * dim));
    k.resize(static_cast<std::size_t>(hkv * seq * dim));
    for (auto& x : q) x = n(rng);
    for (auto& x : k) x = 0.3f * n(rng);
    for (int h = 0; h < hkv; ++h) {
      // Query head h*group shares a direction w: keys along w are verticals.
      std::vector<float> w(static_cast<std::size_t>(dim));
      for (auto& x : w) x = n(rng);
      auto query = [&](std::int32_t r) {
        return &q[(static_cast<std::size_t>(h * (hq / hkv)) * static_cast<std::size_t>(nq) + static_cast<std::size_t>(r)) * dim];
      };
      auto key = [&](std::int32_t j) { return &k[(static_cast<std::size_t>(h) * seq + static_cast<std::size_t>(j)) * dim]; };
      for (std::int32_t r = 0; r < nq; ++r)
        for (int e = 0; e < dim; ++e) query(r)[e] += w[static_cast<std::size_t>(e)];
      for (std::int32_t r = 0; r < nq; ++r)  // slash: key (q_pos - lag) resembles query r
        for (int e = 0; e < dim; ++e) key(q_pos[static_cast<std::size_t>(r)] - lag)[e] = (h == 0 ? 0.25f : 1.5f) * query(r)[e];
      for (auto v : hot)
        for (int e = 0; e < dim; ++e) key(v)[e] = (h == 0 ? 1.0f : 0.4f) * w[static_cast<std::size_t>(e)];
    }
  }
  IndexProblem problem(std::span<const std::int32_t> kp, std::span<const float> kk) const {
    IndexProblem p;
    p.heads_q = hq;
    p.heads_kv = hkv;
    p.head_dim = dim;
    p.seq_len = seq;
    p.q = tensor(q);
    p.k = {kk.data(), kk.size(), DType::f32};
    p.q_pos = q_pos;
    p.k_pos = kp;
    return p;
  }
  IndexProblem problem() const { return problem(k_pos, k); }
};

bool has(const std::vector<std::int32_t>& v, std::int32_t x) { return std::binary_search(v.begin(), v.end(), x); }

TEST(IndexBuilder, TopKFindsPlantedPatternAndKeepsForcedEntries) {
  const Planted pl(1);
  IndexBuildConfig c;
  c.select = IndexBuildConfig::Select::top_k;
  c.vertical_budget = 10;
  c.slash_budget = 8;
  c.sink_tokens = 4;
  c.local_diagonals = 3;
  const SparseIndex idx = build_index(pl.problem(), c);
  ASSERT_EQ(idx.mode, SparseMode::vertical_slash);
  ASSERT_EQ(idx.vertical_slash.size(), 4u);
  for (const auto& h : idx.vertical_slash) {
    EXPECT_EQ(h.verticals.size(), 10u);
    EXPECT_EQ(h.slashes.size(), 8u);
    for (std::int32_t s = 0; s < 4; ++s) EXPECT_TRUE(has(h.verticals, s));
    for (std::int32_t d = 0; d < 3; ++d) EXPECT_TRUE(has(h.slashes, d));
  }
  for (auto v : pl.hot) EXPECT_TRUE(has(idx.vertical_slash[0].verticals, v)) << v;
  EXPECT_TRUE(has(idx.vertical_slash[2].slashes, pl.lag));
  // The result is a valid index for attention.
  TileLayout layout{pl.q_pos, pl.k_pos, pl.seq, true};
  EXPECT_NO_THROW(validate_tile({4, 2, 64, pl.nq, pl.seq}, layout, idx));
}

TEST(IndexBuilder, TopPReachesTheShareWithinCaps) {
  const Planted pl(2);
  IndexBuildConfig c;
  c.p = 0.8;
  c.sink_tokens = 0;
  c.local_diagonals = 0;
  const SparseIndex idx = build_index(pl.problem(), c);
  // The planted structure holds most of the mass, so few entries reach p.
  const auto& verticals = idx.vertical_slash[0].verticals;
  for (auto v : pl.hot) EXPECT_TRUE(has(verticals, v));
  EXPECT_LE(verticals.size(), 5u);
  EXPECT_EQ(idx.vertical_slash[2].slashes, std::vector<std::int32_t>{pl.lag});
  c.p = 1.0;
  c.max_verticals = 7;
  c.max_slashes = 5;
  const SparseIndex capped = build_index(pl.problem(), c);
  EXPECT_EQ(capped.vertical_slash[1].verticals.size(), 7u);
  EXPECT_EQ(capped.vertical_slash[1].slashes.size(), 5u);
}

TEST(IndexBuilder, ScoresAreProbabilities) {
  const Planted pl(3);
  const auto p = pl.problem();
  const auto mx = row_max(p);
  const auto sum = row_sum(p, mx);
  const KeyScores s = key_scores(p, mx, sum);
  for (std::size_t h = 0; h < s.columns.size(); ++h) {
    std::int64_t cols = 0, diags = 0;
    for (const auto& c : s.columns[h]) cols += c.second;
    for (auto d : s.diagonals[h]) diags += d;
    EXPECT_EQ(cols, diags);  // every (query, key) term lands in one column and one diagonal
    EXPECT_NEAR(static_cast<double>(cols) / kScoreOne, pl.nq, 1e-6 * pl.nq);  // each query row sums to 1
  }
}

TEST(IndexBuilder, DistributedCombineEqualsSingleProcess) {
  const Planted pl(4);
  for (const char* kind : {"contiguous", "zigzag", "stripe"})
    for (int ranks : {2, 3, 4})
      for (auto mode : {IndexBuildConfig::Select::top_k, IndexBuildConfig::Select::top_p}) {
        IndexBuildConfig c;
        c.select = mode;
        c.vertical_budget = 50;
        c.slash_budget = 40;
        c.p = 0.8;
        const SparseIndex single = build_index(pl.problem(), c);
        std::vector<std::vector<std::int32_t>> kp;
        std::vector<std::vector<float>> kk;
        for (int r = 0; r < ranks; ++r) {
          kp.push_back(test::partition_pos(kind, pl.seq, ranks, r));
          kk.emplace_back();
          for (int h = 0; h < pl.hkv; ++h)
            for (auto pos : kp.back())
              kk.back().insert(kk.back().end(), pl.k.begin() + (h * pl.seq + pos) * pl.dim,
                               pl.k.begin() + (h * pl.seq + pos + 1) * pl.dim);
        }
        std::vector<std::vector<float>> maxes;
        for (int r = 0; r < ranks; ++r) maxes.push_back(row_max(pl.problem(kp[static_cast<std::size_t>(r)], kk[static_cast<std::size_t>(r)])));
        const auto gmax = combine_row_max(maxes);
        std::vector<std::vector<std::int64_t>> sums;
        for (int r = 0; r < ranks; ++r) sums.push_back(row_sum(pl.problem(kp[static_cast<std::size_t>(r)], kk[static_cast<std::size_t>(r)]), gmax));
        const auto gsum = combine_row_sum(sums);
        std::vector<KeyScores> scores;
        for (int r = 0; r < ranks; ++r) scores.push_back(key_scores(pl.problem(kp[static_cast<std::size_t>(r)], kk[static_cast<std::size_t>(r)]), gmax, gsum));
        const SparseIndex dist = select_index(combine_key_scores(scores), c, pl.seq);
        SCOPED_TRACE(std::string(kind) + " " + std::to_string(ranks));
        ASSERT_EQ(dist.vertical_slash.size(), single.vertical_slash.size());
        for (std::size_t h = 0; h < dist.vertical_slash.size(); ++h) {
          EXPECT_EQ(dist.vertical_slash[h].verticals, single.vertical_slash[h].verticals);
          EXPECT_EQ(dist.vertical_slash[h].slashes, single.vertical_slash[h].slashes);
        }
      }
}

TEST(IndexBuilder, BadInputIsRejected) {
  const Planted pl(5);
  auto p = pl.problem();
  p.heads_q = 3;
  EXPECT_THROW(build_index(p, {}), std::invalid_argument);
  p = pl.problem();
  std::vector<std::int32_t> bad = pl.k_pos;
  bad[3] = pl.seq;
  p.k_pos = bad;
  EXPECT_THROW(build_index(p, {}), std::invalid_argument);
  IndexBuildConfig c;
  c.p = 1.5;
  EXPECT_THROW(build_index(pl.problem(), c), std::invalid_argument);
  EXPECT_THROW(combine_row_max({}), std::invalid_argument);
}

}  // namespace
}  // namespace rm::kernels
