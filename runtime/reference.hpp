#pragma once
// The numerical ground truth of `ringmaster-run --check`: the attention of
// the whole sequence in one process, on the same seeded inputs the ranks
// fill (seed.hpp), through the CPU kernels as one tile per batch
// (reference_attention), and the same by brute force in fp64 from the mask
// alone (brute_force_attention), the oracle the first is tested against.
// docs/runtime-check.md says how errors are measured and the bound.
#include <cstdint>
#include <vector>

#include "kernels/tile.hpp"

namespace rm::runtime {

struct ReferenceProblem {
  int64_t batch = 1;
  int32_t seq_len = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true;
  uint64_t seed = 1;
  bool backward = true;
  kernels::SparseIndex index;  // dense, or one entry per GLOBAL query head (vertical_slash or block_mask)
  // When not empty (an index built per batch element): batch b runs per_batch[b], not index.
  std::vector<kernels::SparseIndex> per_batch;
  const kernels::SparseIndex& index_of(int64_t b) const { return per_batch.empty() ? index : per_batch.at(size_t(b)); }
};

struct ReferenceResult {       // fp32
  std::vector<float> o, dq;    // [batch][heads][seq_len][head_dim]
  std::vector<float> lse;      // [batch][heads][seq_len]
  std::vector<float> dk, dv;   // [batch][kv_heads][seq_len][head_dim]; empty when !backward (dq too)
};

// Single process, whole sequence: for each batch, one tile of all seq_len rows
// (positions 0..S-1) through kernels::cpu::attention_forward /
// attention_backward (softmax scale 1/sqrt(head_dim)); inputs from
// input_value (q, k, v, d_o) for every (b, token, head, d); GQA: query head h
// uses KV head h / (heads / kv_heads). Backward gets the merged O and LSE of
// the forward. Rows that see no key: o = 0, lse = -inf, dq = 0.
ReferenceResult reference_attention(const ReferenceProblem& p);

// The same by brute force in fp64 from kernels::attends (for tests on tiny
// sizes; O(S^2)), rounded to fp32 at the end.
ReferenceResult brute_force_attention(const ReferenceProblem& p);

// Both throw std::invalid_argument naming the field on bad sizes (and the
// kernels' message on an index that does not fit the problem).

}  // namespace rm::runtime
