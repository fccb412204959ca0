// Ring partials: forward over each rank's keys, merged, equals the forward
// over all keys; backward summed over ring steps equals the whole backward.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/softmax_merge.hpp"
#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

TEST(Merge, WeightsHandleEmptyParts) {
  auto w = merge_weights(-INFINITY, -INFINITY);
  EXPECT_EQ(w.a, 0.f);
  EXPECT_EQ(w.b, 0.f);
  EXPECT_TRUE(std::isinf(w.lse) && w.lse < 0);
  w = merge_weights(-INFINITY, 2.f);
  EXPECT_EQ(w.a, 0.f);
  EXPECT_EQ(w.b, 1.f);
  EXPECT_EQ(w.lse, 2.f);
  w = merge_weights(std::log(3.f), std::log(1.f));
  EXPECT_NEAR(w.a, 0.75f, 1e-7);
  EXPECT_NEAR(w.b, 0.25f, 1e-7);
  EXPECT_NEAR(w.lse, std::log(4.f), 1e-6);
}

TEST(Merge, RejectsMismatchedSizes) {
  std::vector<float> o(8), l(2), po(6), pl(2);
  EXPECT_THROW(merge_partial(o, l, po, pl, 4), std::invalid_argument);
}

// Keys of `sub` (a subset of the whole problem's key rows, by position) as a tile.
test::Problem sub_problem(const test::Problem& whole, const std::vector<std::int32_t>& k_pos) {
  test::Problem p = whole;
  p.layout.k_pos = k_pos;
  p.shape.rows_k = static_cast<int>(k_pos.size());
  const auto d = static_cast<std::size_t>(whole.shape.head_dim);
  p.k.clear();
  p.v.clear();
  for (int h = 0; h < whole.shape.heads_kv; ++h)
    for (auto pos : k_pos) {  // whole's keys are positions 0..seq-1 in order
      const std::size_t src = (static_cast<std::size_t>(h) * static_cast<std::size_t>(whole.shape.rows_k) +
                               static_cast<std::size_t>(pos)) * d;
      p.k.insert(p.k.end(), whole.k.begin() + static_cast<std::ptrdiff_t>(src), whole.k.begin() + static_cast<std::ptrdiff_t>(src + d));
      p.v.insert(p.v.end(), whole.v.begin() + static_cast<std::ptrdiff_t>(src), whole.v.begin() + static_cast<std::ptrdiff_t>(src + d));
    }
  return p;
}

struct RingCase {
  const char* partition;
  int ranks;
  bool sparse;
};

void PrintTo(const RingCase& c, std::ostream* os) {
  *os << c.partition << " over " << c.ranks << " ranks, " << (c.sparse ? "sparse" : "dense");
}

class RingMerge : public ::testing::TestWithParam<RingCase> {};

TEST_P(RingMerge, PartialsMergeToTheWholeForwardAndBackward) {
  const auto c = GetParam();
  const std::int32_t seq = 900;
  test::Problem whole;
  whole.layout = {test::partition_pos(c.partition, seq, c.ranks, 1), test::iota_pos(0, seq), seq, true};
  whole.shape = {4, 2, 64, static_cast<int>(whole.layout.q_pos.size()), seq};
  if (c.sparse) whole.index = test::random_vertical_slash(4, seq, 25, 4, 21);
  test::fill_random(whole, 22, 1.5f);
  const auto full = test::cpu_forward(whole);

  std::vector<test::Problem> steps;
  for (int r = 0; r < c.ranks; ++r) steps.push_back(sub_problem(whole, test::partition_pos(c.partition, seq, c.ranks, r)));
  test::Forward merged;
  for (std::size_t r = 0; r < steps.size(); ++r) {
    const auto part = test::cpu_forward(steps[r]);
    if (r == 0) {
      merged = part;
    } else {
      merge_partial(merged.out, merged.lse, part.out, part.lse, whole.shape.head_dim);
    }
  }
  EXPECT_LT(test::rel_error(merged.out, full.out), 1e-5);
  EXPECT_LT(test::rel_error(merged.lse, full.lse), 1e-5);

  // Backward per ring step with the merged forward; dq accumulates, dk/dv go back to their positions.
  const auto grads = test::cpu_backward(whole, full);
  std::vector<float> dq(whole.q.size(), 0.f), dk(whole.k.size(), 0.f), dv(whole.v.size(), 0.f);
  const auto d = static_cast<std::size_t>(whole.shape.head_dim);
  for (const auto& s : steps) {
    const TilePlan plan = make_plan(s.shape, s.layout, s.index);
    std::vector<float> sdk(s.k.size(), 0.f), sdv(s.v.size(), 0.f);
    cpu::attention_backward(make_backward_params(plan, tensor(s.q), tensor(s.k), tensor(s.v), tensor(s.dout),
                                                 merged.out, merged.lse, dq, sdk, sdv, /*accumulate=*/true));
    for (int h = 0; h < s.shape.heads_kv; ++h)
      for (std::size_t j = 0; j < s.layout.k_pos.size(); ++j)
        for (std::size_t e = 0; e < d; ++e) {
          const std::size_t from = (static_cast<std::size_t>(h) * s.layout.k_pos.size() + j) * d + e;
          const std::size_t to = (static_cast<std::size_t>(h) * static_cast<std::size_t>(seq) +
                                  static_cast<std::size_t>(s.layout.k_pos[j])) * d + e;
          dk[to] += sdk[from];
          dv[to] += sdv[from];
        }
  }
  EXPECT_LT(test::rel_error(dq, grads.dq), 1e-5);
  EXPECT_LT(test::rel_error(dk, grads.dk), 1e-5);
  EXPECT_LT(test::rel_error(dv, grads.dv), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Partitions, RingMerge,
                         ::testing::Values(RingCase{"contiguous", 3, false}, RingCase{"zigzag", 2, false},
                                           RingCase{"stripe", 4, false}, RingCase{"stripe", 3, true},
                                           RingCase{"zigzag", 3, true}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.partition) + std::to_string(param_info.param.ranks) +
                                  (param_info.param.sparse ? "Sparse" : "Dense");
                         });

}  // namespace
}  // namespace rm::kernels
