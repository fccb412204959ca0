// runtime/dense_step and reference_step: softmax cross-entropy against fp64
// brute force and its gradient against finite differences; AdamW's first two
// steps by hand; the embedding's layout and seeded values; the reference step's
// gradients (GEMM weights of every layer, the tied embedding) against central
// finite differences of its own mean loss; pack/unpack round trip; bad sizes.
#include "runtime/dense_step.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <gtest/gtest.h>

#include "kernels/bf16.hpp"
#include "runtime/reference_step.hpp"

namespace rm::runtime {
namespace {

TEST(CrossEntropy, MatchesBruteForceAndFiniteDifferences) {
  const int64_t V = 7;
  const std::vector<int32_t> targets{3, 0, 6};
  std::vector<float> z(targets.size() * V);
  for (size_t i = 0; i < z.size(); ++i) z[i] = float(std::sin(double(i) * 1.7) * 3.0);
  std::vector<float> loss(targets.size()), dz(z.size());
  cross_entropy(z, targets, V, loss);
  const double scale = 0.25;
  cross_entropy_backward(z, targets, V, scale, dz);
  auto brute = [&](const std::vector<float>& zz, size_t r) {
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(double(zz[r * V + size_t(i)]));
    return std::log(sum) - zz[r * V + size_t(targets[r])];
  };
  for (size_t r = 0; r < targets.size(); ++r) {
    EXPECT_NEAR(loss[r], brute(z, r), 1e-5);
    for (int64_t i = 0; i < V; ++i) {
      std::vector<float> up = z, down = z;
      const float h = 1e-2f;
      up[r * V + size_t(i)] += h, down[r * V + size_t(i)] -= h;
      const double fd = scale * (brute(up, r) - brute(down, r)) / (2.0 * h);
      EXPECT_NEAR(dz[r * V + size_t(i)], fd, 1e-4) << r << " " << i;
    }
  }
}

TEST(AdamW, FirstTwoStepsByHand) {
  // w = 1, g = 0.5 then -0.25, lr 1e-3, betas (0.9, 0.95), eps 1e-8, decay 0.1 (python, fp64).
  std::vector<float> w{1.f}, m{0.f}, v{0.f};
  adamw_step(w, m, v, std::vector<float>{0.5f}, 1);
  EXPECT_NEAR(w[0], 0.99890000002, 1e-7);
  EXPECT_NEAR(m[0], 0.05, 1e-8);
  EXPECT_NEAR(v[0], 0.0125, 1e-8);
  adamw_step(w, m, v, std::vector<float>{-0.25f}, 2);
  EXPECT_NEAR(w[0], 0.9985317405787563, 1e-7);
  // No gradient: decay only.
  std::vector<float> w2{2.f}, m2{0.f}, v2{0.f};
  adamw_step(w2, m2, v2, std::vector<float>{0.f}, 1);
  EXPECT_NEAR(w2[0], 2.0 - 1e-3 * 0.1 * 2.0, 1e-7);
}

TEST(EmbedLayout, TiedAndUntiedSizesAndSeededValues) {
  Model m;
  m.vocab = 100, m.hidden = 16, m.tied_embeddings = true;
  const EmbedLayout tied(m);
  EXPECT_EQ(tied.head, tied.table);
  EXPECT_EQ(tied.norm, 1600);
  EXPECT_EQ(tied.total, 1616);  // the generator's tp_embed_params at tp = 1
  m.tied_embeddings = false;
  const EmbedLayout untied(m);
  EXPECT_EQ(untied.head, 1600);
  EXPECT_EQ(untied.total, 3216);
  for (int64_t i = 0; i < untied.total; ++i) {
    const float v = embed_value(untied, 5, i);
    EXPECT_EQ(v, kernels::round_bf16(v));
    const float bound = i < untied.norm ? 0.25f : 0.126f, centre = i < untied.norm ? 0.f : 1.f;
    EXPECT_LE(std::abs(v - centre), bound) << i;
  }
  std::vector<int> seen(100, 0);
  for (int64_t t = 0; t < 2000; ++t) {
    const int32_t id = token_id(3, 1, t, 100);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 100);
    ++seen[size_t(id)];
    EXPECT_EQ(id, token_id(3, 1, t, 100));
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), 0);
  int same = 0;
  for (int64_t t = 0; t < 200; ++t) same += token_id(3, 1, t, 100) == token_id(3, 2, t, 100);
  EXPECT_LT(same, 20);  // another sample draws other tokens
}

StepProblem tiny_step() {
  StepProblem p;
  LayerProblem& l = p.layer;
  l.batch = 2, l.seq_len = 16, l.hidden = 32, l.intermediate = 48;
  l.heads = 4, l.kv_heads = 2, l.head_dim = 64;
  l.causal = true, l.seed = 11;
  p.layers = 2, p.vocab = 24, p.tied = true;
  return p;
}

double mean_loss(const StepResult& r) {
  return std::accumulate(r.loss.begin(), r.loss.end(), 0.0) / double(r.loss.size());
}

TEST(ReferenceStep, GradientsMatchFiniteDifferencesOfTheLoss) {
  const StepProblem p = tiny_step();
  const StepResult r = reference_step(p);
  ASSERT_EQ(r.grad.size(), 3u);
  ASSERT_EQ(r.loss.size(), 32u);
  const WeightLayout w(p.model());
  const EmbedLayout el(p.model());
  // Per block, the GEMM weights (the norms have no gradient here) and the embedding table:
  // the 3 largest |gradient| entries of each region.
  struct Region {
    size_t block;
    int64_t at, n;
  };
  std::vector<Region> regions;
  for (size_t b = 0; b < 2; ++b)
    for (auto [at, n] : {std::pair{w.qkv, w.hidden * w.qkv_width()}, {w.o, w.q * w.hidden}, {w.gu, w.hidden * 2 * w.inter},
                         {w.down, w.inter * w.hidden}})
      regions.push_back({b, at, n});
  regions.push_back({2, el.table, el.vocab * el.hidden});
  for (const Region& g : regions) {
    std::vector<int64_t> idx(size_t(g.n));
    std::iota(idx.begin(), idx.end(), g.at);
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](int64_t a, int64_t b) {
      return std::abs(r.grad[g.block][size_t(a)]) > std::abs(r.grad[g.block][size_t(b)]);
    });
    for (int k = 0; k < 3; ++k) {
      const size_t i = size_t(idx[size_t(k)]);
      const float h = 1e-2f;
      auto params = r.before;
      params[g.block][i] += h;
      const double up = mean_loss(reference_step(p, &params));
      params[g.block][i] -= 2 * h;
      const double down = mean_loss(reference_step(p, &params));
      const double fd = (up - down) / (2.0 * h), got = r.grad[g.block][i];
      EXPECT_GT(std::abs(got), 1e-3) << "block " << g.block << ": the absolute slack would dominate";
      EXPECT_NEAR(got, fd, 0.03 * std::abs(fd) + 2e-5) << "block " << g.block << " element " << i;
    }
  }
}

TEST(ReferenceStep, AdamWAfterTheGradient) {
  const StepProblem p = tiny_step();
  const StepResult r = reference_step(p);
  for (size_t b = 0; b < r.after.size(); ++b)
    for (size_t i = 0; i < r.after[b].size(); i += 97) {
      std::vector<float> w{r.before[b][i]}, m{0.f}, v{0.f};
      adamw_step(w, m, v, std::vector<float>{r.grad[b][i]}, 1);
      EXPECT_EQ(r.after[b][i], kernels::round_bf16(w[0]));
    }
}

TEST(ReferenceStep, BadSizesNameTheirField) {
  StepProblem p = tiny_step();
  p.vocab = 0;
  EXPECT_THROW(reference_step(p), std::invalid_argument);
  p = tiny_step();
  std::vector<std::vector<float>> wrong(2);
  try {
    reference_step(p, &wrong);
    FAIL();
  } catch (const std::invalid_argument& x) {
    EXPECT_NE(std::string(x.what()).find("params"), std::string::npos);
  }
}

TEST(StepOutputs, PackRoundTrip) {
  StepOutputs o;
  o.rank = 3, o.sample_base = 2, o.tokens = {5, 1, 9};
  o.loss = {1.5f, 2.5f, 3.5f};
  o.grad_at = {0, 10}, o.param_at = {0, 0};
  o.grad = {{1.f, 2.f}, {3.f}}, o.params = {{4.f}, {5.f, 6.f}};
  const StepOutputs back = unpack_step(pack(o));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.sample_base, 2);
  EXPECT_EQ(back.tokens, o.tokens);
  EXPECT_EQ(back.loss, o.loss);
  EXPECT_EQ(back.grad_at, o.grad_at);
  EXPECT_EQ(back.grad, o.grad);
  EXPECT_EQ(back.params, o.params);
  const std::string bytes = pack(o);
  EXPECT_THROW(unpack_step(bytes.substr(0, bytes.size() - 3)), std::runtime_error);
}

}  // namespace
}  // namespace rm::runtime
