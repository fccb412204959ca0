// CPU forward against the fp64 dense reference with the mask materialised.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

using test::Problem;

Problem make(int hq, int hkv, int dim, const TileLayout& layout, SparseIndex index, std::uint64_t seed,
             float spread = 1.f) {
  Problem p;
  p.shape = {hq, hkv, dim, static_cast<int>(layout.q_pos.size()), static_cast<int>(layout.k_pos.size())};
  p.layout = layout;
  p.index = std::move(index);
  test::fill_random(p, seed, spread);
  return p;
}

TileLayout self_layout(std::int32_t first, std::int32_t n, std::int32_t seq) {
  return {test::iota_pos(first, n), test::iota_pos(0, first + n), seq, true};
}

// fp32 inputs: errors at fp32 rounding level (measured ~1e-6).
constexpr double kFp32Bound = 2e-5;

void expect_matches_reference(const Problem& p, double bound, bool bf16 = false) {
  const auto f = test::cpu_forward(p, bf16);
  const auto r = test::reference_attention(p, 0, false);
  EXPECT_LT(test::rel_error(f.out, r.out), bound);
  EXPECT_LT(test::rel_error(f.lse, r.lse), bound);
}

TEST(AttentionCpu, DenseCausalMatchesFp64) {
  for (int dim : {64, 128})
    for (int n : {1, 77, 200, 300}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " n " + std::to_string(n));
      expect_matches_reference(make(2, 2, dim, self_layout(0, n, n), {}, 1 + n, 2.f), kFp32Bound);
    }
}

TEST(AttentionCpu, GqaAndNonCausal) {
  auto layout = self_layout(100, 150, 250);
  expect_matches_reference(make(4, 2, 64, layout, {}, 3), kFp32Bound);
  expect_matches_reference(make(6, 1, 128, layout, {}, 4), kFp32Bound);
  layout.causal = false;
  expect_matches_reference(make(4, 2, 64, layout, {}, 5), kFp32Bound);
}

TEST(AttentionCpu, VerticalSlashAndBlockMaskMatchMaskedDense) {
  const std::int32_t seq = 700;
  for (const char* kind : {"contiguous", "zigzag", "stripe"}) {
    SCOPED_TRACE(kind);
    TileLayout layout{test::partition_pos(kind, seq, 2, 1), test::partition_pos(kind, seq, 2, 0), seq, true};
    expect_matches_reference(make(4, 2, 64, layout, test::random_vertical_slash(4, seq, 30, 5, 8), 9), kFp32Bound);
    expect_matches_reference(make(2, 1, 128, layout, test::random_block_mask(2, seq, 0.4, 10), 11), kFp32Bound);
  }
}

TEST(AttentionCpu, EmptyRowsGiveZeroOutputAndMinusInfinityLse) {
  TileLayout layout{test::iota_pos(0, 64), test::iota_pos(64, 64), 128, true};  // every key in the future
  const Problem p = make(1, 1, 64, layout, {}, 12);
  const auto f = test::cpu_forward(p);
  for (float x : f.out) ASSERT_EQ(x, 0.f);
  for (float x : f.lse) ASSERT_TRUE(std::isinf(x) && x < 0);
}

TEST(AttentionCpu, Bf16InputsWidenExactly) {
  // With bf16-exact inputs, bf16 and fp32 storage must give the same result.
  Problem p = make(2, 1, 128, self_layout(0, 190, 190), test::random_vertical_slash(2, 190, 10, 3, 2), 13);
  test::round_to_bf16(p.q);
  test::round_to_bf16(p.k);
  test::round_to_bf16(p.v);
  const auto a = test::cpu_forward(p, false), b = test::cpu_forward(p, true);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  expect_matches_reference(p, kFp32Bound, true);
}

TEST(AttentionCpu, ExplicitScale) {
  const Problem p = make(1, 1, 64, self_layout(0, 100, 100), {}, 14);
  const auto f = test::cpu_forward(p, false, 0.3f);
  const auto r = test::reference_attention(p, 0.3f, false);
  EXPECT_LT(test::rel_error(f.out, r.out), kFp32Bound);
  EXPECT_LT(test::rel_error(f.lse, r.lse), kFp32Bound);
}

}  // namespace
}  // namespace rm::kernels
