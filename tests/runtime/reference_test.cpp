// runtime/reference: the kernels' whole-sequence reference agrees with an
// fp64 brute force from the mask alone on many small random problems (dense
// causal and full, vertical-slash, block-mask, GQA, batches, lengths that are
// not multiples of 128); rows that see no key give O = 0 and LSE = -inf in
// both; the output layout and the input mapping are checked against
// input_value directly; bad sizes name their field.
#include "runtime/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "runtime/seed.hpp"

namespace rm::runtime {
namespace {

using kernels::SparseIndex;
using kernels::SparseMode;

// max|got - ref| / max|ref| over finite entries; -inf must match -inf exactly.
double max_rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      EXPECT_EQ(got[i], ref[i]) << "entry " << i;
      continue;
    }
    err = std::max(err, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return scale == 0 ? err : err / scale;
}

std::vector<int32_t> random_subset(std::mt19937& rng, int32_t n, double share) {
  std::bernoulli_distribution pick(share);
  std::vector<int32_t> out;
  for (int32_t x = 0; x < n; ++x)
    if (pick(rng)) out.push_back(x);
  return out;
}

SparseIndex random_index(std::mt19937& rng, SparseMode mode, int heads, int32_t seq_len) {
  SparseIndex index;
  index.mode = mode;
  const int32_t blocks = kernels::index_blocks(seq_len);
  for (int h = 0; h < heads; ++h) {
    if (mode == SparseMode::vertical_slash)
      index.vertical_slash.push_back({random_subset(rng, seq_len, 0.03), random_subset(rng, seq_len, 0.01)});
    if (mode == SparseMode::block_mask) {
      kernels::BlockMask m;
      for (int32_t qb = 0; qb < blocks; ++qb) m.rows.push_back(random_subset(rng, blocks, 0.5));
      index.block_mask.push_back(std::move(m));
    }
  }
  return index;
}

void expect_match(const ReferenceProblem& p, const std::string& what) {
  const ReferenceResult got = reference_attention(p), ref = brute_force_attention(p);
  EXPECT_LT(max_rel_error(got.o, ref.o), 1e-5) << what << ": o";
  EXPECT_LT(max_rel_error(got.lse, ref.lse), 1e-5) << what << ": lse";
  if (!p.backward) {
    EXPECT_TRUE(got.dq.empty() && got.dk.empty() && got.dv.empty()) << what;
    return;
  }
  EXPECT_LT(max_rel_error(got.dq, ref.dq), 1e-5) << what << ": dq";
  EXPECT_LT(max_rel_error(got.dk, ref.dk), 1e-5) << what << ": dk";
  EXPECT_LT(max_rel_error(got.dv, ref.dv), 1e-5) << what << ": dv";
}

TEST(Reference, MatchesBruteForceOnRandomProblems) {
  std::mt19937 rng(2026);
  struct Heads {
    int q, kv;
  };
  const Heads head_sets[] = {{1, 1}, {2, 2}, {4, 2}, {4, 1}};
  const SparseMode modes[] = {SparseMode::dense, SparseMode::vertical_slash, SparseMode::block_mask};
  int cases = 0;
  for (SparseMode mode : modes)
    for (int rep = 0; rep < 5; ++rep, ++cases) {
      ReferenceProblem p;
      const Heads hs = head_sets[std::uniform_int_distribution<int>(0, 3)(rng)];
      p.heads = hs.q;
      p.kv_heads = hs.kv;
      p.batch = 1 + rep % 2;
      p.seq_len = std::uniform_int_distribution<int32_t>(1, 300)(rng);
      p.head_dim = rep == 4 ? 128 : 64;
      p.causal = mode != SparseMode::dense || rep % 2 == 0;  // dense: causal and full
      p.seed = rng();
      p.backward = rep != 3;
      p.index = random_index(rng, mode, p.heads, p.seq_len);
      expect_match(p, kernels::to_string(mode) + " S=" + std::to_string(p.seq_len) + " heads " +
                          std::to_string(p.heads) + "/" + std::to_string(p.kv_heads) + " batch " +
                          std::to_string(p.batch) + (p.causal ? " causal" : " full"));
    }
  EXPECT_EQ(cases, 15);
}

TEST(Reference, RowsWithoutKeysGiveZeroAndMinusInfinityInBoth) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (SparseMode mode : {SparseMode::vertical_slash, SparseMode::block_mask}) {
    ReferenceProblem p;
    p.seq_len = 300;
    p.heads = 2;
    p.kv_heads = 1;
    p.head_dim = 64;
    p.index.mode = mode;
    for (int h = 0; h < p.heads; ++h) {
      // Query block 0 (rows 0..127) sees no key: the slash 200 crosses block
      // diagonals 1 and 2 only, the vertical 150 is after every row of it;
      // the block mask leaves row 0 empty.
      p.index.vertical_slash.push_back({{150}, {200}});
      p.index.block_mask.push_back({{{}, {0, 1}, {1}}});
    }
    if (mode == SparseMode::vertical_slash) p.index.block_mask.clear();
    else p.index.vertical_slash.clear();
    const ReferenceResult got = reference_attention(p), ref = brute_force_attention(p);
    for (const ReferenceResult* r : {&got, &ref})
      for (int h = 0; h < p.heads; ++h)
        for (int i = 0; i < 128; ++i) {
          ASSERT_EQ(r->lse[size_t(h * p.seq_len + i)], neg_inf) << kernels::to_string(mode) << " head " << h << " row " << i;
          for (int d = 0; d < p.head_dim; ++d) {
            const size_t at = (size_t(h) * p.seq_len + i) * p.head_dim + d;
            ASSERT_EQ(r->o[at], 0.0f);
            ASSERT_EQ(r->dq[at], 0.0f);
          }
        }
    // Later rows do see keys.
    EXPECT_TRUE(std::isfinite(got.lse[200]));
    expect_match(p, kernels::to_string(mode) + " with empty rows");
  }
}

// One output row computed here straight from input_value: the layouts of o,
// lse and the (b, token, head, d) mapping of every input, GQA included.
TEST(Reference, RowMatchesInputValuesDirectly) {
  ReferenceProblem p;
  p.batch = 2;
  p.seq_len = 40;
  p.heads = 4;
  p.kv_heads = 2;
  p.head_dim = 64;
  p.seed = 99;
  p.backward = false;
  const ReferenceResult r = reference_attention(p);
  const int64_t b = 1, h = 3, kvh = 1, i = 17;  // query head 3 reads KV head 3 / (4 / 2) = 1
  const double scale = 1.0 / std::sqrt(64.0);
  std::vector<double> s;
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < p.head_dim; ++d)
      dot += double(input_value(p.seed, InputTensor::q, b, i, h, d)) * input_value(p.seed, InputTensor::k, b, j, kvh, d);
    s.push_back(scale * dot);
  }
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double x : s) sum += std::exp(x - m);
  const double lse = m + std::log(sum);
  const size_t row = size_t((b * p.heads + h) * p.seq_len + i);
  EXPECT_NEAR(r.lse[row], lse, 1e-5 * std::abs(lse));
  for (int64_t d = 0; d < p.head_dim; ++d) {
    double o = 0;
    for (int64_t j = 0; j <= i; ++j) o += std::exp(s[size_t(j)] - lse) * input_value(p.seed, InputTensor::v, b, j, kvh, d);
    EXPECT_NEAR(r.o[row * size_t(p.head_dim) + size_t(d)], o, 1e-5) << "d " << d;
  }
}

TEST(Reference, BadSizesNameTheirField) {
  auto message = [](ReferenceProblem p) -> std::string {
    try {
      reference_attention(p);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no error)";
  };
  ReferenceProblem good;
  good.seq_len = 16;
  good.heads = 4;
  good.kv_heads = 2;
  good.head_dim = 64;
  EXPECT_NO_THROW(reference_attention(good));
  ReferenceProblem p = good;
  p.batch = 0;
  EXPECT_NE(message(p).find("batch"), std::string::npos) << message(p);
  p = good, p.seq_len = 0;
  EXPECT_NE(message(p).find("seq_len"), std::string::npos) << message(p);
  p = good, p.heads = 0;
  EXPECT_NE(message(p).find("heads"), std::string::npos) << message(p);
  p = good, p.kv_heads = 3;
  EXPECT_NE(message(p).find("kv_heads"), std::string::npos) << message(p);
  p = good, p.head_dim = 0;
  EXPECT_NE(message(p).find("head_dim"), std::string::npos) << message(p);
  p = good, p.head_dim = 96;  // the kernels take 64 or 128
  EXPECT_NE(message(p).find("head_dim"), std::string::npos) << message(p);
  p = good, p.index.mode = SparseMode::vertical_slash;  // no heads in the index
  EXPECT_NE(message(p).find("vertical-slash index has 0 heads"), std::string::npos) << message(p);
  EXPECT_THROW(brute_force_attention(p), std::invalid_argument);
}

}  // namespace
}  // namespace rm::runtime
