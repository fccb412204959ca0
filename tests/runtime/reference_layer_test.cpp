// runtime/reference_layer: the fp32 layer reference agrees with the fp64
// brute force on small problems (causal and full, GQA, batches, a
// vertical-slash index); the brute force's gradients (dx and every GEMM weight)
// agree with central finite differences of its own forward on the loss
// sum(y . dy); seeded inputs are deterministic; bad sizes name their field.
#include "runtime/reference_layer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>

#include "runtime/dense_layer.hpp"

namespace rm::runtime {
namespace {

double max_rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    if (std::isinf(ref[i]) && got[i] == ref[i]) continue;
    err = std::max(err, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return scale == 0 ? err : err / scale;
}

LayerProblem tiny(int64_t batch, int32_t seq, bool causal) {
  LayerProblem p;
  p.batch = batch, p.seq_len = seq;
  p.hidden = 32, p.intermediate = 48;
  p.heads = 4, p.kv_heads = 2, p.head_dim = 64;  // the kernels run head_dim 64 or 128
  p.causal = causal;
  p.seed = 7;
  p.layer = 1;
  return p;
}

void expect_agree(const LayerProblem& p) {
  const LayerInputs in = seeded_layer_inputs(p);
  const LayerResult got = reference_layer(p, in), want = brute_force_layer(p, in);
  EXPECT_LT(max_rel_error(got.y, want.y), 1e-5);
  EXPECT_LT(max_rel_error(got.attention.o, want.attention.o), 1e-5);
  EXPECT_LT(max_rel_error(got.attention.lse, want.attention.lse), 1e-5);
  if (!p.backward) {
    EXPECT_TRUE(got.dx.empty());
    EXPECT_TRUE(got.wgrad.empty());
    return;
  }
  EXPECT_LT(max_rel_error(got.dx, want.dx), 1e-5);
  EXPECT_LT(max_rel_error(got.wgrad, want.wgrad), 1e-5);
  EXPECT_LT(max_rel_error(got.attention.dq, want.attention.dq), 1e-5);
  EXPECT_LT(max_rel_error(got.attention.dk, want.attention.dk), 1e-5);
  EXPECT_LT(max_rel_error(got.attention.dv, want.attention.dv), 1e-5);
  // No gradient for the norm weights.
  const WeightLayout w(p.model());
  for (int64_t i = 0; i < w.hidden; ++i) {
    EXPECT_EQ(got.wgrad[size_t(w.norm1 + i)], 0.f);
    EXPECT_EQ(got.wgrad[size_t(w.norm2 + i)], 0.f);
  }
}

TEST(ReferenceLayer, MatchesFp64BruteForceCausal) { expect_agree(tiny(2, 37, true)); }
TEST(ReferenceLayer, MatchesFp64BruteForceFull) { expect_agree(tiny(1, 20, false)); }
TEST(ReferenceLayer, MatchesFp64BruteForceForwardOnly) {
  LayerProblem p = tiny(1, 16, true);
  p.backward = false;
  expect_agree(p);
}
TEST(ReferenceLayer, MatchesFp64BruteForceVerticalSlash) {
  LayerProblem p = tiny(1, 300, true);
  p.heads = 2, p.kv_heads = 1;
  p.index.mode = kernels::SparseMode::vertical_slash;
  for (int h = 0; h < p.heads; ++h) p.index.vertical_slash.push_back({{0, 5 + h, 130}, {0, 1, 3, 140}});
  expect_agree(p);
}

// Central differences of L = sum(y . dy) in fp64 against the analytic gradients.
TEST(ReferenceLayer, BruteForceGradientsMatchFiniteDifferences) {
  LayerProblem p = tiny(1, 6, true);
  p.hidden = 8, p.intermediate = 8, p.heads = 2, p.kv_heads = 1, p.head_dim = 4;  // fp64 alone: any head_dim
  const LayerInputs in = seeded_layer_inputs(p);
  const LayerResult g = brute_force_layer(p, in);
  std::vector<double> x(in.x.begin(), in.x.end()), w(in.weights.begin(), in.weights.end());
  auto loss = [&] {
    const auto y = brute_force_layer_output(p, x, w);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * in.dy[i];
    return l;
  };
  auto fd = [&](std::vector<double>& v, size_t i) {
    const double e = 1e-5, keep = v[i];
    v[i] = keep + e;
    const double up = loss();
    v[i] = keep - e;
    const double down = loss();
    v[i] = keep;
    return (up - down) / (2 * e);
  };
  double err = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = fd(x, i);
    err = std::max(err, std::abs(want - g.dx[i]));
    scale = std::max(scale, std::abs(want));
  }
  EXPECT_LT(err / scale, 1e-5) << "dx";
  const WeightLayout lay(p.model());
  err = scale = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (lay.fan_in(int64_t(i)) == 0) continue;  // norm weights: held constant
    const double want = fd(w, i);
    err = std::max(err, std::abs(want - g.wgrad[i]));
    scale = std::max(scale, std::abs(want));
  }
  EXPECT_LT(err / scale, 1e-5) << "weight gradients";
}

TEST(ReferenceLayer, SeededInputsAreDeterministicAndScaled) {
  const LayerProblem p = tiny(2, 9, true);
  const LayerInputs a = seeded_layer_inputs(p), b = seeded_layer_inputs(p);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.dy, b.dy);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_NE(a.x, a.dy);
  LayerProblem q = p;
  q.seed = 8;
  EXPECT_NE(seeded_layer_inputs(q).x, a.x);
  // The layer output stays O(1).
  const LayerResult r = reference_layer(p, a);
  double big = 0;
  for (float v : r.y) big = std::max(big, double(std::abs(v)));
  EXPECT_GT(big, 0.5);
  EXPECT_LT(big, 8.0);
}

TEST(ReferenceLayer, BadSizesNameTheField) {
  LayerProblem p = tiny(1, 8, true);
  p.kv_heads = 3;
  try {
    seeded_layer_inputs(p);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kv_heads"), std::string::npos);
  }
  p = tiny(1, 8, true);
  LayerInputs in = seeded_layer_inputs(p);
  in.weights.pop_back();
  EXPECT_THROW(reference_layer(p, in), std::invalid_argument);
  in = seeded_layer_inputs(p);
  in.x.pop_back();
  EXPECT_THROW(brute_force_layer(p, in), std::invalid_argument);
}

}  // namespace
}  // namespace rm::runtime
