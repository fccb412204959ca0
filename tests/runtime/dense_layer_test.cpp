// runtime/dense_layer: the weight layout holds the model's layer parameters in
// the documented order; weights and dense inputs are pure, bf16-exact
// functions of their coordinates on streams of their own; the row kernels'
// backward passes agree with finite differences of their forwards; the
// outputs --check gathers survive packing.
#include "runtime/dense_layer.hpp"

#include <cmath>
#include <random>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "kernels/bf16.hpp"
#include "runtime/seed.hpp"

namespace rm::runtime {
namespace {

Model small_model() {
  Model m;
  m.name = "t";
  m.layers = 2, m.hidden = 64, m.heads = 4, m.kv_heads = 2, m.head_dim = 16, m.intermediate = 96;
  return m;
}

TEST(WeightLayout, HoldsTheLayerParametersInOrder) {
  const Model m = small_model();
  const WeightLayout w(m);
  EXPECT_EQ(w.total, m.layer_params());
  EXPECT_EQ(w.norm1, 0);
  EXPECT_EQ(w.qkv, 64);
  EXPECT_EQ(w.o, w.qkv + 64 * (64 + 2 * 32));
  EXPECT_EQ(w.norm2, w.o + 64 * 64);
  EXPECT_EQ(w.gu, w.norm2 + 64);
  EXPECT_EQ(w.down, w.gu + 64 * 2 * 96);
  EXPECT_EQ(w.total, w.down + 96 * 64);
  EXPECT_EQ(w.fan_in(0), 0);
  EXPECT_EQ(w.fan_in(w.qkv), 64);
  EXPECT_EQ(w.fan_in(w.o), 64);  // q = heads x head_dim = 64
  EXPECT_EQ(w.fan_in(w.norm2 + 3), 0);
  EXPECT_EQ(w.fan_in(w.gu), 64);
  EXPECT_EQ(w.fan_in(w.down), 96);
  EXPECT_EQ(w.fan_in(w.total - 1), 96);
}

TEST(WeightValue, PureBf16ExactAndScaled) {
  const WeightLayout w(small_model());
  std::set<float> seen;
  for (int64_t i = 0; i < w.total; i += 7) {
    const float v = weight_value(w, 3, 1, i);
    EXPECT_EQ(v, weight_value(w, 3, 1, i));
    EXPECT_EQ(v, kernels::round_bf16(v));
    const int64_t fan = w.fan_in(i);
    if (fan == 0) {
      EXPECT_GE(v, 0.875f);
      EXPECT_LE(v, 1.125f);
    } else {
      EXPECT_LE(std::abs(v), 1.0f / std::sqrt(float(fan)) * 1.01f);
    }
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 100u);
  int differ_layer = 0, differ_seed = 0;
  for (int64_t i = w.qkv; i < w.qkv + 100; ++i) {
    differ_layer += weight_value(w, 3, 0, i) != weight_value(w, 3, 1, i);
    differ_seed += weight_value(w, 4, 1, i) != weight_value(w, 3, 1, i);
  }
  EXPECT_GT(differ_layer, 90);
  EXPECT_GT(differ_seed, 90);
}

TEST(DenseInput, OwnStreamsPureAndBf16Exact) {
  int same_as_attention = 0, x_equals_dy = 0;
  for (int64_t t = 0; t < 50; ++t)
    for (int64_t f = 0; f < 8; ++f) {
      const float x = dense_input_value(9, DenseInput::x, 1, t, f);
      EXPECT_EQ(x, dense_input_value(9, DenseInput::x, 1, t, f));
      EXPECT_EQ(x, kernels::round_bf16(x));
      EXPECT_GE(x, -1.f);
      EXPECT_LT(x, 1.f);
      same_as_attention += x == input_value(9, InputTensor::q, 1, t, f, 0);
      x_equals_dy += x == dense_input_value(9, DenseInput::dy, 1, t, f);
    }
  EXPECT_LT(same_as_attention, 10);
  EXPECT_LT(x_equals_dy, 10);
}

// Central differences (in fp64 on the fp32 kernels, step 1e-2: fp32 rounding
// dominates below) of L = sum(forward . g) against the backward.
TEST(RowKernels, BackwardsMatchFiniteDifferences) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t rows = 3, H = 16, I = 8;
  std::vector<float> x(size_t(rows * H)), w(static_cast<size_t>(H)), g(size_t(rows * H)), res(size_t(rows * H));
  for (auto* v : {&x, &g, &res})
    for (float& e : *v) e = u(rng);
  for (float& e : w) e = 1.f + u(rng) / 8;
  std::vector<float> dx(x.size()), y(x.size());
  rms_norm_backward(x, w, g, res, dx, H);
  auto loss = [&] {
    rms_norm(x, w, y, H);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += double(y[i]) * g[i];
    return l;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + 1e-2f;
    const double up = loss();
    x[i] = keep - 1e-2f;
    const double down = loss();
    x[i] = keep;
    EXPECT_NEAR(dx[i] - res[i], (up - down) / 2e-2, 2e-3) << i;
  }
  std::vector<float> gu(size_t(rows * 2 * I)), act(size_t(rows * I)), da(act.size()), dgu(gu.size());
  for (float& e : gu) e = 2 * u(rng);
  for (float& e : da) e = u(rng);
  swiglu_backward(gu, da, dgu, I);
  auto loss2 = [&] {
    swiglu(gu, act, I);
    double l = 0;
    for (size_t i = 0; i < act.size(); ++i) l += double(act[i]) * da[i];
    return l;
  };
  for (size_t i = 0; i < gu.size(); ++i) {
    const float keep = gu[i];
    gu[i] = keep + 1e-2f;
    const double up = loss2();
    gu[i] = keep - 1e-2f;
    const double down = loss2();
    gu[i] = keep;
    EXPECT_NEAR(dgu[i], (up - down) / 2e-2, 2e-3) << i;
  }
}

TEST(RowKernels, RmsNormHasUnitRms) {
  const int64_t H = 32;
  std::vector<float> x(size_t(2 * H)), w(size_t(H), 1.f), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3.f + (i >= size_t(H) ? 100.f : 0.f);
  rms_norm(x, w, y, H);
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(y[size_t(r * H + i)]) * y[size_t(r * H + i)];
    EXPECT_NEAR(std::sqrt(ss / H), 1.0, 1e-4);
  }
}

TEST(DenseOutputs, PackRoundTripAndTruncation) {
  DenseOutputs d;
  d.rank = 3, d.layer = 1;
  d.tokens = {5, 1, 9};
  d.y = {1.5f, -2.f};
  d.dx = {0.25f};
  d.wgrad = {1, 2, 3, 4};
  const std::string bytes = pack(d);
  const DenseOutputs e = unpack_dense(bytes);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.layer, 1);
  EXPECT_EQ(e.tokens, d.tokens);
  EXPECT_EQ(e.y, d.y);
  EXPECT_EQ(e.dx, d.dx);
  EXPECT_EQ(e.wgrad, d.wgrad);
  EXPECT_THROW(unpack_dense(std::string_view(bytes).substr(0, bytes.size() - 1)), std::runtime_error);
}

}  // namespace
}  // namespace rm::runtime
