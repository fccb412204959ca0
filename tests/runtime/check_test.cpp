// --check's comparison: slices cut from the reference itself pass with zero
// error; one wrong element is reported against its tensor; overlapping or
// missing slices are refused (the layouts would be wrong, not the numbers).
#include "runtime/check.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "runtime/reference.hpp"

namespace rm::runtime {
namespace {

using schedule::BufferRole;

CheckProblem problem() {
  CheckProblem p;
  p.batch = 2, p.seq_len = 256, p.heads = 4, p.kv_heads = 2, p.head_dim = 64, p.seed = 3;
  return p;
}

// Two "ranks": tokens split by parity, all heads; the values copied from the reference.
std::vector<OutputSlice> slices_of(const CheckProblem& p) {
  ReferenceProblem rp;
  rp.batch = p.batch, rp.seq_len = int32_t(p.seq_len), rp.heads = p.heads, rp.kv_heads = p.kv_heads;
  rp.head_dim = p.head_dim, rp.seed = p.seed, rp.backward = true;
  const ReferenceResult ref = reference_attention(rp);
  std::vector<OutputSlice> out;
  for (int r = 0; r < 2; ++r)
    for (BufferRole content : {BufferRole::o, BufferRole::lse, BufferRole::dq, BufferRole::dkv}) {
      OutputSlice x;
      x.rank = r;
      x.layout.content = content;
      for (int32_t t = r; t < p.seq_len; t += 2) x.layout.tokens.push_back(t);
      x.layout.heads.resize(size_t(content == BufferRole::dkv ? p.kv_heads : p.heads));
      std::iota(x.layout.heads.begin(), x.layout.heads.end(), 0);
      const int64_t H = int64_t(x.layout.heads.size()), S = p.seq_len, D = p.head_dim;
      for (int part = 0; part < (content == BufferRole::dkv ? 2 : 1); ++part)
        for (int64_t b = 0; b < p.batch; ++b)
          for (int64_t h = 0; h < H; ++h)
            for (int32_t t : x.layout.tokens) {
              const int64_t g = (b * H + h) * S + t;
              if (content == BufferRole::lse) {
                x.values.push_back(ref.lse[size_t(g)]);
                continue;
              }
              const auto& src = content == BufferRole::o ? ref.o : content == BufferRole::dq ? ref.dq : part == 0 ? ref.dk : ref.dv;
              for (int64_t d = 0; d < D; ++d) x.values.push_back(src[size_t(g * D + d)]);
            }
      out.push_back(std::move(x));
    }
  return out;
}

TEST(Check, TheReferenceItselfPasses) {
  const CheckReport r = check_attention(problem(), slices_of(problem()), 1e-12);
  ASSERT_EQ(r.tensors.size(), 5u);
  for (const auto& t : r.tensors) {
    EXPECT_EQ(t.max_rel_error, 0.0) << t.name;
    EXPECT_GT(t.max_ref, 0.0) << t.name;
  }
  EXPECT_TRUE(r.passed());
}

TEST(Check, OneWrongElementIsReportedOnItsTensor) {
  auto slices = slices_of(problem());
  slices[6].values[17] += 0.5f;  // rank 1's dQ
  const CheckReport r = check_attention(problem(), slices, 2e-2);
  EXPECT_FALSE(r.passed());
  for (const auto& t : r.tensors) {
    if (t.name == "dQ") EXPECT_NEAR(t.max_abs_error, 0.5, 1e-6);
    else EXPECT_EQ(t.max_rel_error, 0.0) << t.name;
  }
}

TEST(Check, ForwardOnlyComparesOAndLse) {
  CheckProblem p = problem();
  p.backward = false;
  auto slices = slices_of(p);
  const CheckReport r = check_attention(p, {slices[0], slices[1], slices[4], slices[5]}, 1e-12);
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_TRUE(r.passed());
}

TEST(Check, RefusesOverlapsAndGaps) {
  auto slices = slices_of(problem());
  auto twice = slices;
  twice.push_back(slices[0]);
  EXPECT_THROW(check_attention(problem(), twice, 1), std::runtime_error);
  auto gap = slices;
  gap.erase(gap.begin() + 4);  // rank 1's O
  EXPECT_THROW(check_attention(problem(), gap, 1), std::runtime_error);
}

}  // namespace
}  // namespace rm::runtime
