// runtime/seed: the seeded inputs are a pure, bf16-exact function of their
// arguments, uniform on [-1, 1), and decorrelated across tensors, seeds and
// every coordinate (a constant, a repeated value or a hash that ignores an
// argument fails these loose bounds).
#include "runtime/seed.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16.hpp"

namespace rm::runtime {
namespace {

constexpr int kDraws = 100000;

// Coordinates of draw i, spread over every argument.
struct Coord {
  int64_t b, token, head, d;
};
Coord coord(int i) { return {i % 3, (i * 7919) % 131072, (i / 3) % 16, (i / 48) % 128}; }

float draw(uint64_t seed, InputTensor t, const Coord& c) { return input_value(seed, t, c.b, c.token, c.head, c.d); }

double correlation(const std::function<double(int)>& x, const std::function<double(int)>& y) {
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double a = x(i), b = y(i);
    sx += a, sy += b, sxx += a * a, syy += b * b, sxy += a * b;
  }
  const double n = kDraws, cov = sxy / n - sx / n * sy / n;
  return cov / std::sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
}

TEST(Seed, DeterministicInRangeAndBf16Exact) {
  std::set<float> distinct;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kDraws; ++i) {
    const Coord c = coord(i);
    const float x = draw(42, InputTensor::q, c);
    ASSERT_EQ(x, draw(42, InputTensor::q, c)) << "draw " << i;
    ASSERT_GE(x, -1.0f);
    ASSERT_LT(x, 1.0f);
    ASSERT_EQ(kernels::round_bf16(x), x) << "draw " << i << " is not a bf16 value";
    distinct.insert(x);
    sum += x;
    sum_sq += double(x) * x;
  }
  // Uniform on [-1, 1): mean 0, variance 1/3; the mean's standard error is 0.0018.
  EXPECT_NEAR(sum / kDraws, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / kDraws, 1.0 / 3.0, 0.01);
  // Each binade [2^-n-1, 2^-n) holds 128 bf16 values and 2^-n-1 of the draws:
  // 10^5 uniform draws fill the top ~9 binades of each sign, about 2300 values.
  EXPECT_GT(distinct.size(), 1500u);
}

TEST(Seed, UsesTheWholeRange) {
  int below = 0, above = 0;
  for (int i = 0; i < kDraws; ++i) {
    const float x = draw(7, InputTensor::v, coord(i));
    below += x < -0.99f;
    above += x > 0.99f;
  }
  // Each tail of width 0.01 holds ~0.5% of the draws (500).
  EXPECT_GT(below, 300);
  EXPECT_GT(above, 300);
}

TEST(Seed, TensorsSeedsAndCoordinatesAreDecorrelated) {
  auto base = [](int i) { return double(draw(1, InputTensor::q, coord(i))); };
  const std::vector<std::pair<const char*, std::function<double(int)>>> others{
      {"tensor k", [](int i) { return double(draw(1, InputTensor::k, coord(i))); }},
      {"tensor v", [](int i) { return double(draw(1, InputTensor::v, coord(i))); }},
      {"tensor d_o", [](int i) { return double(draw(1, InputTensor::d_o, coord(i))); }},
      {"seed + 1", [](int i) { return double(draw(2, InputTensor::q, coord(i))); }},
      {"batch + 1", [](int i) { Coord c = coord(i); ++c.b; return double(draw(1, InputTensor::q, c)); }},
      {"token + 1", [](int i) { Coord c = coord(i); ++c.token; return double(draw(1, InputTensor::q, c)); }},
      {"head + 1", [](int i) { Coord c = coord(i); ++c.head; return double(draw(1, InputTensor::q, c)); }},
      {"d + 1", [](int i) { Coord c = coord(i); ++c.d; return double(draw(1, InputTensor::q, c)); }},
      // Swapped coordinates must not collide (a hash of a sum or xor of the arguments would).
      {"token <-> d", [](int i) { const Coord c = coord(i); return double(input_value(1, InputTensor::q, c.b, c.d, c.head, c.token)); }},
  };
  // With 10^5 independent draws the correlation's standard error is 0.0032.
  for (const auto& [name, other] : others) EXPECT_NEAR(correlation(base, other), 0.0, 0.02) << name;
  EXPECT_NEAR(correlation(base, base), 1.0, 1e-9);  // the measure itself sees a dependence
}

TEST(Seed, NeighbouringElementsDiffer) {
  // A hash that ignored an argument would repeat values along that axis.
  int equal = 0;
  for (int i = 0; i < 10000; ++i) {
    const Coord c = coord(i);
    const float x = draw(3, InputTensor::k, c);
    equal += x == input_value(3, InputTensor::k, c.b, c.token, c.head, c.d + 1);
    equal += x == input_value(3, InputTensor::k, c.b, c.token + 1, c.head, c.d);
    equal += x == input_value(3, InputTensor::k, c.b, c.token, c.head + 1, c.d);
    equal += x == input_value(3, InputTensor::k, c.b + 1, c.token, c.head, c.d);
  }
  // Two independent uniform bf16 draws are equal with probability sum_v p_v^2 =
  // 2^-10 * 4/3 (about 1/770), so ~52 of these 40000 pairs by chance; an
  // ignored argument would make 10000 of them equal.
  EXPECT_LT(equal, 150);
}

}  // namespace
}  // namespace rm::runtime
