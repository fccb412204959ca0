#pragma once
// Test oracle: dense softmax(QK^T)V in fp64 with the mask materialised from
// kernels::attends, its backward, and the random problems the tests share.
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/tile.hpp"

namespace rm::kernels::test {

struct Problem {
  TileShape shape;
  TileLayout layout;
  SparseIndex index;
  std::vector<float> q, k, v, dout;  // fp32 values (already bf16-exact when bf16 is tested)
};

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

// Random q, k, v, dout ~ N(0, 1) (times `spread` for q, to sharpen softmax).
void fill_random(Problem& p, std::uint64_t seed, float spread = 1.0f);

// Contiguous positions [first, first + n).
std::vector<std::int32_t> iota_pos(std::int32_t first, std::int32_t n);

// Positions of ring rank `rank` of `ranks` under partition "contiguous",
// "zigzag" (2*ranks chunks, rank r holds r and 2*ranks-1-r) or "stripe"
// (blocks of `stripe` tokens dealt round robin).
std::vector<std::int32_t> partition_pos(const std::string& kind, std::int32_t seq_len, int ranks, int rank,
                                        std::int32_t stripe = kIndexBlock);

// A random vertical-slash index: each head some verticals and slashes (offset 0 always).
SparseIndex random_vertical_slash(int heads, std::int32_t seq_len, int verticals, int slashes, std::uint64_t seed);
SparseIndex random_block_mask(int heads, std::int32_t seq_len, double density, std::uint64_t seed);

Reference reference_attention(const Problem& p, float scale, bool backward);

// max |a - b| / max(|b|, tiny): the error relative to the reference's size.
double rel_error(const std::vector<float>& a, const std::vector<double>& b);
double rel_error(const std::vector<float>& a, const std::vector<float>& b);

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v);

// The CPU kernels on a Problem; bf16 passes the inputs as bf16 storage.
struct Forward {
  std::vector<float> out, lse;
};
struct Backward {
  std::vector<float> dq, dk, dv;
};
Forward cpu_forward(const Problem& p, bool bf16 = false, float scale = 0);
// Backward of the whole problem with the given (merged) forward result.
Backward cpu_backward(const Problem& p, const Forward& fwd, bool bf16 = false, float scale = 0);
void round_to_bf16(std::vector<float>& v);

}  // namespace rm::kernels::test
