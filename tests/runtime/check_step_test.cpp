// runtime/check.hpp's check_step: the reference's own outputs, split over ranks
// as full copies or as ZeRO shards, pass with no error; a perturbed gradient, a
// parameter left un-updated or a shard nobody holds fails or throws.
#include <gtest/gtest.h>

#include "runtime/check.hpp"

namespace rm::runtime {
namespace {

StepProblem tiny() {
  StepProblem p;
  LayerProblem& l = p.layer;
  l.batch = 2, l.seq_len = 16, l.hidden = 32, l.intermediate = 48;
  l.heads = 4, l.kv_heads = 2, l.head_dim = 64;
  l.seed = 3;
  p.layers = 2, p.vocab = 24;
  return p;
}

// Rank r holds sample r (all 16 positions, reversed); full copies or halves of every block.
std::vector<StepOutputs> split(const StepResult& ref, bool sharded) {
  std::vector<StepOutputs> out(2);
  for (int r = 0; r < 2; ++r) {
    StepOutputs& o = out[size_t(r)];
    o.rank = r, o.sample_base = r;
    for (int t = 15; t >= 0; --t) o.tokens.push_back(t), o.loss.push_back(ref.loss[size_t(r * 16 + t)]);
    for (size_t b = 0; b < ref.grad.size(); ++b) {
      const size_t n = ref.grad[b].size(), half = n / 2, at = sharded ? size_t(r) * half : 0, len = sharded ? half : n;
      o.grad_at.push_back(int64_t(at)), o.param_at.push_back(int64_t(at));
      o.grad.emplace_back(ref.grad[b].begin() + long(at), ref.grad[b].begin() + long(at + len));
      o.params.emplace_back(ref.after[b].begin() + long(at), ref.after[b].begin() + long(at + len));
    }
  }
  return out;
}

TEST(CheckStep, TheReferenceItselfPasses) {
  const StepProblem p = tiny();
  const StepResult ref = reference_step(p);
  for (bool sharded : {false, true}) {
    const CheckReport r = check_step(p, split(ref, sharded), 2e-2);
    EXPECT_TRUE(r.passed()) << sharded;
    for (const auto& t : r.tensors) EXPECT_EQ(t.max_abs_error, 0.0) << t.name;
  }
}

TEST(CheckStep, APerturbedGradientOrAStaleParameterFails) {
  const StepProblem p = tiny();
  const StepResult ref = reference_step(p);
  const WeightLayout w(p.model());
  auto outs = split(ref, false);
  outs[1].grad[0][size_t(w.down + 5)] += 1.f;  // gradients here are ~0.1: far above 2.5 x 2e-2
  CheckReport r = check_step(p, outs, 2e-2);
  EXPECT_FALSE(r.passed());
  for (const auto& t : r.tensors)
    if (t.name == "dW_down") {
      EXPECT_FALSE(t.passed());
    }
  outs = split(ref, true);
  outs[0].params[1][size_t(w.qkv + 1)] = ref.before[1][size_t(w.qkv + 1)];  // an update lost
  r = check_step(p, outs, 2e-2);
  for (const auto& t : r.tensors) EXPECT_EQ(t.passed(), t.name != "W_qkv'") << t.name;
}

TEST(CheckStep, AShardNobodyHoldsThrows) {
  const StepProblem p = tiny();
  auto outs = split(reference_step(p), true);
  outs.pop_back();
  EXPECT_THROW(check_step(p, outs, 2e-2), std::runtime_error);
}

}  // namespace
}  // namespace rm::runtime
