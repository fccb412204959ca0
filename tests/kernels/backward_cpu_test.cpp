// CPU backward against the fp64 reference, and the fp64 reference against
// finite differences of its own forward (so the oracle itself is checked).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

test::Problem make(int hq, int hkv, int dim, TileLayout layout, SparseIndex index, std::uint64_t seed) {
  test::Problem p;
  p.shape = {hq, hkv, dim, static_cast<int>(layout.q_pos.size()), static_cast<int>(layout.k_pos.size())};
  p.layout = std::move(layout);
  p.index = std::move(index);
  test::fill_random(p, seed, 1.5f);
  return p;
}

void expect_grads_match(const test::Problem& p, double bound, bool bf16 = false) {
  const auto f = test::cpu_forward(p, bf16);
  const auto g = test::cpu_backward(p, f, bf16);
  const auto r = test::reference_attention(p, 0, true);
  EXPECT_LT(test::rel_error(g.dq, r.dq), bound);
  EXPECT_LT(test::rel_error(g.dk, r.dk), bound);
  EXPECT_LT(test::rel_error(g.dv, r.dv), bound);
}

TEST(BackwardCpu, DenseAndGqaMatchFp64) {
  for (int dim : {64, 128}) {
    SCOPED_TRACE(dim);
    expect_grads_match(make(2, 2, dim, {test::iota_pos(0, 150), test::iota_pos(0, 150), 150, true}, {}, 31), 2e-5);
    expect_grads_match(make(4, 1, dim, {test::iota_pos(60, 140), test::iota_pos(0, 200), 200, true}, {}, 32), 2e-5);
  }
  expect_grads_match(make(2, 1, 64, {test::iota_pos(0, 90), test::iota_pos(0, 130), 130, false}, {}, 33), 2e-5);
}

TEST(BackwardCpu, SparseAndStripedMatchFp64) {
  const std::int32_t seq = 600;
  TileLayout layout{test::partition_pos("stripe", seq, 2, 1), test::partition_pos("stripe", seq, 2, 0), seq, true};
  expect_grads_match(make(4, 2, 64, layout, test::random_vertical_slash(4, seq, 30, 4, 34), 35), 2e-5);
  expect_grads_match(make(2, 2, 128, layout, test::random_block_mask(2, seq, 0.5, 36), 37), 2e-5);
}

TEST(BackwardCpu, Bf16Inputs) {
  auto p = make(2, 1, 128, {test::iota_pos(0, 200), test::iota_pos(0, 200), 200, true}, {}, 38);
  for (auto* v : {&p.q, &p.k, &p.v, &p.dout}) test::round_to_bf16(*v);
  expect_grads_match(p, 2e-5, true);
}

// Loss L = sum(dout * out); dL/dx by central differences of the fp64 forward.
double loss(const test::Problem& p) {
  const auto r = test::reference_attention(p, 0, false);
  double l = 0;
  for (std::size_t i = 0; i < r.out.size(); ++i) l += r.out[i] * p.dout[i];
  return l;
}

TEST(BackwardCpu, ReferenceAgreesWithFiniteDifferences) {
  auto p = make(2, 1, 64, {{2, 3, 5}, {0, 1, 2, 3, 4}, 6, true}, {}, 39);
  const auto r = test::reference_attention(p, 0, true);
  const auto g = test::cpu_backward(p, test::cpu_forward(p));
  const double h = 1e-2;  // inputs are fp32: a large step keeps the difference well above rounding
  auto check = [&](std::vector<float>& x, const std::vector<double>& grad, const std::vector<float>& cpu, const char* name) {
    for (std::size_t i = 0; i < x.size(); i += 7) {
      const float keep = x[i];
      const float hi = keep + static_cast<float>(h), lo = keep - static_cast<float>(h);
      x[i] = hi;
      const double up = loss(p);
      x[i] = lo;
      const double down = loss(p);
      x[i] = keep;
      const double fd = (up - down) / (static_cast<double>(hi) - lo);
      EXPECT_NEAR(grad[i], fd, 1e-3 * (1 + std::abs(fd))) << name << "[" << i << "]";
      EXPECT_NEAR(cpu[i], fd, 1e-3 * (1 + std::abs(fd))) << name << "[" << i << "]";
    }
  };
  check(p.q, r.dq, g.dq, "dq");
  check(p.k, r.dk, g.dk, "dk");
  check(p.v, r.dv, g.dv, "dv");
}

}  // namespace
}  // namespace rm::kernels
