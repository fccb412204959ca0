// A set of global token positions, as a context-parallel partition hands them
// to one rank: a union of strided runs ("count runs of len tokens, stride
// apart"). The rank stores its tokens in this order, so local position p is
// the p-th token of the concatenation — kernel tiles are cut in that order.
#pragma once

#include <cstdint>
#include <vector>

namespace rm::sparsity {

struct TokenRun {
  int64_t begin = 0;   // first token of the first run
  int64_t len = 0;     // tokens per run
  int64_t stride = 0;  // distance between run starts (ignored when count == 1)
  int64_t count = 1;   // number of runs
  int64_t tokens() const { return len * count; }
  bool operator==(const TokenRun&) const = default;
};

struct TokenSet {
  std::vector<TokenRun> runs;

  int64_t size() const {
    int64_t n = 0;
    for (const auto& r : runs) n += r.tokens();
    return n;
  }
  // Every token in local order (for tests and small inputs only).
  std::vector<int64_t> tokens() const {
    std::vector<int64_t> out;
    out.reserve(static_cast<size_t>(size()));
    for (const auto& r : runs)
      for (int64_t c = 0; c < r.count; ++c)
        for (int64_t t = 0; t < r.len; ++t) out.push_back(r.begin + c * r.stride + t);
    return out;
  }
  bool operator==(const TokenSet&) const = default;
};

}  // namespace rm::sparsity
