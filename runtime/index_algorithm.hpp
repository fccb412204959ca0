// MTraining's online sparse-index building as its code computes it
// (minference/ops/op_utils/vertical_slash_utils.py, calc_index), one stage per
// function, on plain arrays in the bf16 arithmetic the Schedule's buffers
// carry — so the runtime executes the Schedule's index_build ops with data of
// exactly the declared sizes, and --check rebuilds the same index in one
// process by running the same stages for every rank (reference_index).
//   scores     the last 64 queries against the local keys, scaled logits (bf16),
//              -inf where the key follows the query (Q K^T by OpenBLAS dgemm)
//   top-p only row maxima -> all-gather -> global max; exp(scores - max) (bf16)
//              and row sums -> all-gather -> global sum
//   columns    per key: the sum over the 64 rows (top-p: of probabilities
//              exp / (sum x 64); static budgets: of the raw logits, sinks +inf)
//   diagonals  per offset q - k: the same sums along each diagonal (static:
//              the local diagonals +inf), gathered and added at the root
//   select     top-k by the head's budget (static) or top-p (keep while the
//              running share stays below p), ties to the lower position
// Partial sums that cross ranks are added in double: exact for a few bf16
// terms, so the result does not depend on the order ranks arrive in.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/tile.hpp"

namespace rm::runtime::index_alg {

inline constexpr int kLastQueries = 64;  // calc_index's last_q_size
inline constexpr double kTopP = 0.9;     // MTraining's top-p configs: 0.9 (also 0.95)

struct Selection {
  bool top_p = false;
  int64_t seq_len = 0;
  int sink_tokens = 30;       // static: always kept (vertical +inf)
  int local_diagonals = 100;  // static: offsets 0..99 always kept (slash +inf)
  int64_t v_slots = 0, s_slots = 0;  // the index buffers' widths (padded budgets)
  // static: per global query head, the vertical and slash budget
  std::vector<int64_t> v_budget, s_budget;
};

// q: [Q][D] the last queries (positions S-Q .. S-1), k: [N][D] keys at kpos;
// out: [Q][N] bf16-rounded scaled logits, -inf where kpos > qpos.
void scores(std::span<const float> q, std::span<const float> k, std::span<const int32_t> kpos, int64_t seq_len,
            int head_dim, std::span<float> out);
// Per row of [Q][N]: the max (bf16 values, so exact), -inf for an empty row.
void row_max(std::span<const float> qk, int64_t n, std::span<float> out);
// qk <- bf16(exp(qk - gmax[row])); sums[row] = bf16(sum over the row).
void exp_rows(std::span<float> qk, int64_t n, std::span<const float> gmax, std::span<float> sums);
// Combining per-rank partials (rows of `rows` each, rank after rank).
std::vector<float> combine_max(std::span<const float> parts, int64_t rows);
std::vector<float> combine_sum(std::span<const float> parts, int64_t rows);  // bf16(sum in double)

// Top-p: qk <- bf16(qk / (gsum[row] x Q)) in place (calc_index: qk /= qk_sum * last_q_size).
void normalize(std::span<float> qk, int64_t n, std::span<const float> gsum);
// Column sums [N] of [Q][N] (probabilities in top-p mode; raw logits with static budgets,
// where a masked entry makes the column -inf, as in calc_index); static: positions below
// sink_tokens +inf.
void columns(std::span<const float> qk, int64_t n, std::span<const int32_t> kpos, const Selection& sel,
             std::span<float> out);
// Diagonal sums [N + Q - 1] of [Q][N] for contiguous keys kpos[0] .. kpos[0]+N-1: entry j holds
// offset d = dmin + j, dmin = diagonal_min(); offsets without a visible pair: 0 (top-p) or
// -inf (static); static: offsets below local_diagonals +inf.
void diagonals(std::span<const float> qk, int64_t n, std::span<const int32_t> kpos, const Selection& sel,
               std::span<float> out);
int64_t diagonal_min(int64_t seq_len, int32_t first_key, int64_t n);

// The selection's scores at the root from every rank's columns (with their key
// positions) or diagonals (with their dmin): [seq_len] per key position, -inf
// where no rank has one; per offset 0 .. seq_len-1 the partials added in double
// (+inf for a local diagonal; static: -inf without a visible pair).
std::vector<double> vertical_scores(const std::vector<std::span<const float>>& cols,
                                    const std::vector<std::span<const int32_t>>& kpos, const Selection& sel);
std::vector<double> slash_scores(const std::vector<std::span<const float>>& diags, const std::vector<int64_t>& dmin,
                                 const Selection& sel);
// The picks of global query head `head` from those scores: v_slots positions
// ascending, padded with seq_len; s_slots offsets descending, padded with -1.
std::vector<int32_t> pick_verticals(std::span<const double> score, const Selection& sel, int head);
std::vector<int32_t> pick_slashes(std::span<const double> score, const Selection& sel, int head);
// The two in one: what the root's select op computes.
std::vector<int32_t> select_verticals(const std::vector<std::span<const float>>& cols,
                                      const std::vector<std::span<const int32_t>>& kpos, const Selection& sel, int head);
std::vector<int32_t> select_slashes(const std::vector<std::span<const float>>& diags, const std::vector<int64_t>& dmin,
                                    const Selection& sel, int head);

// One head's index for the kernels from the broadcast picks (padding dropped).
kernels::VerticalSlash to_vertical_slash(std::span<const int32_t> v, std::span<const int32_t> s, int64_t seq_len);

}  // namespace rm::runtime::index_alg
