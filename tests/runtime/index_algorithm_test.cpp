// MTraining's index-building stages (runtime/index_algorithm.hpp) against
// brute force on small inputs: scores and their causal mask, the static
// budgets' top-k with sinks and local diagonals, top-p's running share, the
// same picks whichever way the keys are split over ranks (column sums are
// local). The check of a built index: index_reference_test.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "kernels/bf16.hpp"
#include "runtime/index_algorithm.hpp"

namespace rm::runtime {
namespace {

namespace alg = index_alg;
constexpr int kQ = alg::kLastQueries;

std::vector<float> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = kernels::round_bf16(u(rng));
  return v;
}

std::vector<int32_t> range(int32_t begin, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

TEST(IndexAlgorithm, ScoresAreScaledBf16LogitsUnderTheCausalMask) {
  const int S = 256, D = 8, N = 128;
  const auto q = random_bf16(size_t(kQ * D), 1), k = random_bf16(size_t(N * D), 2);
  const auto kpos = range(S - N, N);  // the last keys: the mask cuts them
  std::vector<float> out(size_t(kQ * N));
  alg::scores(q, k, kpos, S, D, out);
  for (int r = 0; r < kQ; ++r)
    for (int j = 0; j < N; ++j) {
      const float got = out[size_t(r * N + j)];
      if (kpos[size_t(j)] > S - kQ + r) {
        EXPECT_EQ(got, -std::numeric_limits<float>::infinity());
        continue;
      }
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += double(q[size_t(r * D + d)]) * k[size_t(j * D + d)];
      EXPECT_EQ(got, kernels::round_bf16(float(dot / std::sqrt(double(D)))));
    }
}

alg::Selection static_selection(int64_t S, int64_t v_budget, int64_t s_budget) {
  alg::Selection sel;
  sel.top_p = false;
  sel.seq_len = S;
  sel.sink_tokens = 4, sel.local_diagonals = 3;
  sel.v_slots = 128, sel.s_slots = 128;
  sel.v_budget = {v_budget}, sel.s_budget = {s_budget};
  return sel;
}

// Scores, columns and picks of keys split into contiguous chunks, as the ranks do.
std::vector<int32_t> verticals_of_split(const std::vector<float>& q, const std::vector<float>& k, int S, int D,
                                        const std::vector<int>& cuts, const alg::Selection& sel) {
  std::vector<std::vector<float>> cols;
  std::vector<std::vector<int32_t>> keys;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const int n = cuts[c + 1] - cuts[c];
    const auto kpos = range(cuts[c], n);
    std::vector<float> qk(static_cast<size_t>(kQ * n)), col(static_cast<size_t>(n));
    alg::scores(q, std::span<const float>(k).subspan(size_t(cuts[c] * D), size_t(n * D)), kpos, S, D, qk);
    alg::columns(qk, n, kpos, sel, col);
    cols.push_back(col), keys.push_back(kpos);
  }
  std::vector<std::span<const float>> cs(cols.begin(), cols.end());
  std::vector<std::span<const int32_t>> ks(keys.begin(), keys.end());
  return alg::select_verticals(cs, ks, sel, 0);
}

TEST(IndexAlgorithm, StaticVerticalsAreTheTopKColumnSumsWithSinksAndDoNotDependOnTheSplit) {
  const int S = 512, D = 8;
  const auto q = random_bf16(size_t(kQ * D), 3), k = random_bf16(size_t(S * D), 4);
  const alg::Selection sel = static_selection(S, 20, 10);
  const auto whole = verticals_of_split(q, k, S, D, {0, S}, sel);
  EXPECT_EQ(verticals_of_split(q, k, S, D, {0, 256, S}, sel), whole);
  EXPECT_EQ(verticals_of_split(q, k, S, D, {0, 128, 256, 384, S}, sel), whole);
  // Brute force: sinks first, then the largest column sums of the raw logits
  // (a masked entry makes the column -inf), ties to the lower position.
  std::vector<std::pair<double, int>> score;
  for (int j = 0; j < S; ++j) {
    double s = 0;
    for (int r = 0; r < kQ; ++r) {
      if (j > S - kQ + r) {
        s = -std::numeric_limits<double>::infinity();
        break;
      }
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += double(q[size_t(r * D + d)]) * k[size_t(j * D + d)];
      s += kernels::round_bf16(float(dot / std::sqrt(double(D))));
    }
    score.emplace_back(j < sel.sink_tokens ? std::numeric_limits<double>::infinity()
                                           : double(kernels::round_bf16(float(s))), j);
  }
  std::stable_sort(score.begin(), score.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<int32_t> want;
  for (int i = 0; i < 20; ++i) want.push_back(score[size_t(i)].second);
  std::sort(want.begin(), want.end());
  want.resize(128, S);
  EXPECT_EQ(whole, want);
  for (int s = 0; s < sel.sink_tokens; ++s) EXPECT_TRUE(std::binary_search(whole.begin(), whole.begin() + 20, s));
}

TEST(IndexAlgorithm, StaticSlashesKeepTheLocalDiagonalsAndTheBudgetSortedDescending) {
  const int S = 512, D = 8, N = 256;
  const auto q = random_bf16(size_t(kQ * D), 5), k = random_bf16(size_t(S * D), 6);
  const alg::Selection sel = static_selection(S, 10, 12);
  std::vector<std::vector<float>> dias;
  std::vector<int64_t> dmin;
  for (int c = 0; c < 2; ++c) {
    const auto kpos = range(c * N, N);
    std::vector<float> qk(size_t(kQ * N)), dia(size_t(N + kQ - 1));
    alg::scores(q, std::span<const float>(k).subspan(size_t(c * N * D), size_t(N * D)), kpos, S, D, qk);
    alg::diagonals(qk, N, kpos, sel, dia);
    dias.push_back(dia), dmin.push_back(alg::diagonal_min(S, kpos[0], N));
  }
  std::vector<std::span<const float>> ds(dias.begin(), dias.end());
  const auto s = alg::select_slashes(ds, dmin, sel, 0);
  ASSERT_EQ(s.size(), 128u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end(), std::greater<>()));
  EXPECT_EQ(std::count_if(s.begin(), s.end(), [](int32_t x) { return x >= 0; }), 12);
  for (int d = 0; d < sel.local_diagonals; ++d) EXPECT_NE(std::find(s.begin(), s.end(), d), s.end()) << d;
  const auto vs = alg::to_vertical_slash({}, s, S);
  EXPECT_EQ(vs.slashes.size(), 12u);
  EXPECT_TRUE(std::is_sorted(vs.slashes.begin(), vs.slashes.end()));
}

TEST(IndexAlgorithm, TopPKeepsPicksWhileTheirRunningShareStaysBelowP) {
  // One head, 8 positions on one rank: the column scores are given directly.
  alg::Selection sel;
  sel.top_p = true;
  sel.seq_len = 8;
  sel.v_slots = 8;
  const std::vector<float> col{0.05f, 0.4f, 0.3f, 0.1f, 0.06f, 0.05f, 0.02f, 0.02f};
  const auto kpos = range(0, 8);
  const std::vector<std::span<const float>> cs{col};
  const std::vector<std::span<const int32_t>> ks{kpos};
  // best first: 0.4, 0.3, 0.1 (running 0.8), 0.06 (0.86), then 0.05 would reach 0.91
  const auto v = alg::select_verticals(cs, ks, sel, 0);
  EXPECT_EQ(v, (std::vector<int32_t>{1, 2, 3, 4, 8, 8, 8, 8}));
}

TEST(IndexAlgorithm, RowStatisticsCombineExactlyInAnyOrder) {
  const std::vector<float> a{1.f, 0.0078125f}, b{0.00390625f, 3.f}, c{2.f, 1.5f};
  std::vector<float> abc, cba;
  for (const auto* p : {&a, &b, &c}) abc.insert(abc.end(), p->begin(), p->end());
  for (const auto* p : {&c, &b, &a}) cba.insert(cba.end(), p->begin(), p->end());
  EXPECT_EQ(alg::combine_sum(abc, 2), alg::combine_sum(cba, 2));
  EXPECT_EQ(alg::combine_max(abc, 2), (std::vector<float>{2.f, 3.f}));
}

}  // namespace
}  // namespace rm::runtime
