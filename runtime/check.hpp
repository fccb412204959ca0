// --check: the ranks' outputs against the single-process reference. Rank 0
// assembles every rank's output slices (inputs.hpp) into the global O, LSE,
// dQ, dK and dV — each element exactly once, or the layouts are wrong and it
// says so — and compares each with reference.hpp's on the same seeded inputs.
// The error of a tensor is max|got - ref| / max|ref| (docs/runtime-check.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tile.hpp"
#include "runtime/inputs.hpp"
#include "sim/config/experiment.hpp"

namespace rm::runtime {

struct TensorCheck {
  std::string name;  // "O", "LSE", "dQ", "dK", "dV"
  int64_t elements = 0;
  double max_abs_error = 0, max_ref = 0, max_rel_error = 0;
};

struct CheckReport {
  std::vector<TensorCheck> tensors;
  double bound = 0;
  bool passed() const;
};

struct CheckProblem {
  int64_t batch = 1, seq_len = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true, backward = true;
  uint64_t seed = 1;
  kernels::SparseIndex index;  // dense, or per global query head
};

// Throws std::runtime_error when the slices overlap, leave elements uncovered or
// lie outside the problem.
CheckReport check_attention(const CheckProblem& p, const std::vector<OutputSlice>& slices, double bound);

}  // namespace rm::runtime
