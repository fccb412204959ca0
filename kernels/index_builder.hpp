#pragma once
// Online sparse-index building, MTraining style: the last queries of the
// sequence (64 by default, causal-masked) are scored against every key; the
// softmax-normalised scores summed per key column pick the verticals and
// summed per diagonal (offset q-k) pick the slashes, by top-k (static budgets)
// or top-p (cumulative share of the total, capped). Sinks and the diagonals
// next to the main one are always kept.
//
// Distributed form: each rank holds some keys and the same last queries.
//   1. row_max on local keys        -> combine_row_max (all-gather, max)
//   2. row_sum with the global max  -> combine_row_sum (all-gather, sum)
//   3. key_scores with both         -> combine_key_scores (gather columns, sum diagonals)
//   4. select_index on the combined scores (then broadcast).
// Sums are fixed-point integers, so combining in any order is exact and the
// index equals the single-process build_index bit for bit.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/tile.hpp"

namespace rm::kernels {

struct IndexBuildConfig {
  enum class Select { top_k, top_p };
  Select select = Select::top_p;
  int vertical_budget = 1000;  // top_k: verticals kept, forced sinks included
  int slash_budget = 6096;     // top_k: slashes kept, forced diagonals included
  double p = 0.9;              // top_p: keep until this share of the total score
  int max_verticals = 4096;    // top_p caps
  int max_slashes = 4096;
  int sink_tokens = 30;        // positions 0..sink_tokens-1 always vertical
  int local_diagonals = 100;   // offsets 0..local_diagonals-1 always slash
};

// The scoring inputs one rank holds. q: [heads_q][q_pos.size()][head_dim]
// (the last queries), k: [heads_kv][k_pos.size()][head_dim] (local keys).
struct IndexProblem {
  int heads_q = 0, heads_kv = 0, head_dim = 0;
  std::int32_t seq_len = 0;
  ConstTensor q, k;
  std::span<const std::int32_t> q_pos, k_pos;
  float softmax_scale = 0;  // 0: 1/sqrt(head_dim)
};

// Per (head, query row): [heads_q * rows].
std::vector<float> row_max(const IndexProblem& problem);
std::vector<float> combine_row_max(std::span<const std::vector<float>> parts);
std::vector<std::int64_t> row_sum(const IndexProblem& problem, std::span<const float> global_max);
std::vector<std::int64_t> combine_row_sum(std::span<const std::vector<std::int64_t>> parts);

// Scores in fixed point (kScoreOne = a probability of 1), per query head.
inline constexpr double kScoreOne = 1099511627776.0;  // 2^40
struct KeyScores {
  std::vector<std::vector<std::pair<std::int32_t, std::int64_t>>> columns;  // [head] (position, score)
  std::vector<std::vector<std::int64_t>> diagonals;                         // [head][offset 0..seq_len)
};
KeyScores key_scores(const IndexProblem& problem, std::span<const float> global_max,
                     std::span<const std::int64_t> global_sum);
KeyScores combine_key_scores(std::span<const KeyScores> parts);

SparseIndex select_index(const KeyScores& scores, const IndexBuildConfig& config, std::int32_t seq_len);

// Single process: all keys local.
SparseIndex build_index(const IndexProblem& problem, const IndexBuildConfig& config);

}  // namespace rm::kernels
