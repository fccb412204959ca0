// The check of an index built at run time (runtime/index_reference.hpp):
// every rank's picks assembled over the heads, a differing pick accepted only
// at a near-tie its scores' bounds explain — soundness over many random cases
// (any pick made under scores within the bounds is accepted), and planted wrong
// picks (far from the cut, or with exact inputs) rejected.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "runtime/index_building.hpp"
#include "runtime/index_reference.hpp"

namespace rm::runtime {
namespace {

namespace alg = index_alg;

kernels::SparseIndex index_of(std::vector<kernels::VerticalSlash> heads) {
  kernels::SparseIndex x;
  x.mode = kernels::SparseMode::vertical_slash;
  x.vertical_slash = std::move(heads);
  return x;
}

bool same(const std::vector<kernels::VerticalSlash>& a, const std::vector<kernels::VerticalSlash>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].verticals != b[i].verticals || a[i].slashes != b[i].slashes) return false;
  return true;
}

TEST(IndexReference, UnpacksEveryRanksHeadsPerBatchAndCountsRanksThatDisagree) {
  const std::vector<kernels::VerticalSlash> b0{{{0, 5}, {0, 3}}, {{1}, {0}}, {{2, 7}, {0, 1}}, {{3}, {0, 9}}};
  const std::vector<kernels::VerticalSlash> b1{{{4}, {0}}, {{5}, {0}}, {{6}, {0}}, {{7}, {0}}};
  auto pack = [&](int begin, int n, const std::vector<kernels::VerticalSlash>& x0, const std::vector<kernels::VerticalSlash>& x1) {
    std::string out;
    pack_built(begin, {index_of({x0.begin() + begin, x0.begin() + begin + n}), index_of({x1.begin() + begin, x1.begin() + begin + n})},
               out);
    return out;
  };
  const std::string r0 = pack(0, 2, b0, b1), r1 = pack(2, 2, b0, b1);
  const BuiltIndex got = unpack_built_index({r0, r1, r1, ""}, 2, 4);  // rank 2 holds rank 1's heads too
  ASSERT_EQ(got.per_batch.size(), 2u);
  EXPECT_TRUE(same(got.per_batch[0].vertical_slash, b0));
  EXPECT_TRUE(same(got.per_batch[1].vertical_slash, b1));
  EXPECT_EQ(got.disagreements, 0);
  auto off = b1;
  off[3].slashes = {0, 8};
  EXPECT_EQ(unpack_built_index({r0, r1, pack(2, 2, b0, off)}, 2, 4).disagreements, 1);
  EXPECT_THROW(unpack_built_index({r0}, 2, 4), std::runtime_error);               // heads 2, 3 missing
  EXPECT_THROW(unpack_built_index({r0.substr(0, 14), r1}, 2, 4), std::runtime_error);  // truncated
  EXPECT_THROW(unpack_built_index({r0, r1}, 1, 4), std::runtime_error);           // another batch
}

// Hand-computed: 8 candidates, budget 3 (static) — the reference picks 1, 2, 3.
TEST(IndexReference, APickThatDiffersPassesOnlyAsANearTieOfItsBounds) {
  const std::vector<double> score{0.0, 5.0, 4.0, 3.0, 2.9, 1.0, 0.5, 0.2};
  std::vector<double> bound(8, 0.0);
  int64_t ties = 0;
  EXPECT_EQ(compare_picks({3, 1, 2}, {1, 2, 3}, score, bound, false, 8, ties), PickMatch::same);
  // 4 for 3: scores 2.9 vs 3.0, bounds 0.04 each: no overlap -> wrong; 0.06 each: a tie.
  bound[3] = bound[4] = 0.04;
  EXPECT_EQ(compare_picks({1, 2, 4}, {1, 2, 3}, score, bound, false, 8, ties), PickMatch::wrong);
  bound[3] = bound[4] = 0.06;
  EXPECT_EQ(compare_picks({1, 2, 4}, {1, 2, 3}, score, bound, false, 8, ties), PickMatch::tie);
  EXPECT_EQ(ties, 1);
  // A real wrong pick: 7 (0.2) for 3, whatever 3's and 4's bounds.
  EXPECT_EQ(compare_picks({1, 2, 7}, {1, 2, 3}, score, bound, false, 8, ties), PickMatch::wrong);
  // A budget is a count: one pick more is wrong even at a tie.
  EXPECT_EQ(compare_picks({1, 2, 3, 4}, {1, 2, 3}, score, bound, false, 8, ties), PickMatch::wrong);
  EXPECT_EQ(compare_picks({1, 2, 9}, {1, 2, 3}, score, bound, false, 8, ties), PickMatch::wrong);  // off the candidates
}

TEST(IndexReference, TopPAcceptsAnotherCountOnlyWhereTheRunningShareCutIsANearTie) {
  // Probabilities: best first 0.4, 0.3, 0.1 (running 0.8), 0.06 (0.86) kept; 0.05 would reach 0.91.
  const std::vector<double> score{0.05, 0.4, 0.3, 0.1, 0.06, 0.04, 0.03, 0.02};
  std::vector<double> bound(8, 0.0);
  int64_t ties = 0;
  const std::vector<int32_t> want{1, 2, 3, 4};
  EXPECT_EQ(compare_picks({1, 2, 3, 4, 0}, want, score, bound, true, 8, ties), PickMatch::wrong);
  // Bounds of 0.002 each move the sums by up to 0.016 and the cut 0.9 x total by 0.0144:
  // 0.91 - 0.01 could fall below the cut -> a fifth pick is a near-tie.
  std::fill(bound.begin(), bound.end(), 0.002);
  EXPECT_EQ(compare_picks({1, 2, 3, 4, 0}, want, score, bound, true, 8, ties), PickMatch::tie);
  // Dropping to three picks would need the running 0.86 to reach the cut: too far.
  EXPECT_EQ(compare_picks({1, 2, 3}, want, score, bound, true, 8, ties), PickMatch::wrong);
}

// Soundness: any selection the rule makes under scores within the bounds is accepted;
// and picks of the weakest candidates instead of the reference's are not.
TEST(IndexReference, EverySelectionUnderScoresWithinTheBoundsIsAcceptedOverRandomCases) {
  std::mt19937 rng(7);
  int planted_cases = 0, moved_cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool top_p = trial % 2 == 1;
    const int n = 16 + int(rng() % 48);
    alg::Selection sel;
    sel.top_p = top_p;
    sel.seq_len = n;
    sel.v_slots = 4 + int(rng() % 12);
    sel.v_budget = {1 + int(rng() % sel.v_slots)};
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> score(static_cast<size_t>(n)), bound(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      score[size_t(i)] = top_p ? u(rng) / n : std::floor(u(rng) * 8) / 4;  // many exact ties when static
      bound[size_t(i)] = rng() % 3 == 0 ? 0.0 : u(rng) * 0.02 / (top_p ? n : 1);
    }
    auto picks = [&](const std::vector<double>& s) {
      std::vector<int32_t> v = alg::pick_verticals(s, sel, 0);
      v.erase(std::remove(v.begin(), v.end(), n), v.end());
      return v;
    };
    const auto want = picks(score);
    for (int k = 0; k < 5; ++k) {
      std::vector<double> moved = score;
      for (int i = 0; i < n; ++i) moved[size_t(i)] += (2 * u(rng) - 1) * bound[size_t(i)];
      int64_t ties = 0;
      const PickMatch m = compare_picks(picks(moved), want, score, bound, top_p, sel.v_slots, ties);
      EXPECT_NE(m, PickMatch::wrong) << "trial " << trial;
      moved_cases += m == PickMatch::tie;
    }
    // The weakest candidate for the reference's strongest pick, when it is far below.
    std::vector<int32_t> planted = want;
    if (planted.empty()) continue;
    const auto weakest = int32_t(std::min_element(score.begin(), score.end()) - score.begin());
    const auto best = std::max_element(planted.begin(), planted.end(), [&](int32_t a, int32_t b) { return score[size_t(a)] < score[size_t(b)]; });
    if (std::find(want.begin(), want.end(), weakest) != want.end() ||
        score[size_t(*best)] - score[size_t(weakest)] < 0.1 / (top_p ? n : 1))
      continue;
    *best = weakest;
    ++planted_cases;
    int64_t ties = 0;
    EXPECT_EQ(compare_picks(planted, want, score, bound, top_p, sel.v_slots, ties), PickMatch::wrong) << "trial " << trial;
  }
  EXPECT_GT(moved_cases, 100);  // the moved scores did change picks, often
  EXPECT_GT(planted_cases, 100);
}

ReferenceIndex two_heads(bool exact) {
  ReferenceIndex ref;
  ref.batch = 1, ref.heads = 2, ref.exact = exact;
  ref.selection.top_p = false;
  ref.selection.v_slots = ref.selection.s_slots = 4;
  ref.per_batch = {index_of({{{1, 2}, {0, 3}}, {{0, 1}, {0}}})};
  ReferenceIndex::Scores sc;
  sc.v = {1.0, 5.0, 4.0, 3.99, 0.1};
  sc.v_error = {0.0, 0.0, 0.02, 0.02, 0.0};
  sc.s = {9.0, 1.0, 2.0, 3.0, 0.0};
  sc.s_error.assign(5, 0.0);
  ReferenceIndex::Scores other = sc;
  other.v = {5.0, 4.0, 1.0, 1.0, 1.0};
  other.s = {9.0, 1.0, 1.0, 1.0, 0.0};
  ref.scores = {sc, other};
  return ref;
}

TEST(IndexReference, TheIndexLineCountsTiesAndFailsOnAPlantedWrongPick) {
  BuiltIndex got;
  got.per_batch = two_heads(false).per_batch;
  EXPECT_TRUE(check_built_index(two_heads(false), got).passed());
  got.per_batch[0].vertical_slash[0].verticals = {1, 3};  // 3.99 for 4.0: a near-tie
  const TensorCheck tie = check_built_index(two_heads(false), got);
  EXPECT_TRUE(tie.passed());
  EXPECT_EQ(tie.note, "1 near-tie pick accepted");
  // The same difference with exact inputs is wrong.
  EXPECT_FALSE(check_built_index(two_heads(true), got).passed());
  got.per_batch[0].vertical_slash[1].verticals = {0, 4};  // 0.1 for 4.0 on head 1: wrong
  const TensorCheck wrong = check_built_index(two_heads(false), got);
  EXPECT_FALSE(wrong.passed());
  EXPECT_DOUBLE_EQ(wrong.max_rel_error, 0.5);
  got = {two_heads(false).per_batch, 1};  // ranks that disagree
  EXPECT_FALSE(check_built_index(two_heads(false), got).passed());
}

}  // namespace
}  // namespace rm::runtime
