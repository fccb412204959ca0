// --check of a sparse index built at run time (docs/runtime.md, "Index
// building"): the reference index, rebuilt in one process by running
// index_algorithm's stages for every rank as the Schedule lays them out, and
// the comparison of every rank's picks with it. The reference reads the Q and K
// the run's index reads: the seeded inputs (attention scopes: exact, so the
// picks must be identical) or, in the layer scope, the reference's QKV GEMM
// rounded to bf16, with per element how far the run's bf16 value may lie from
// it (its fp32 GEMM sums differ by rounding). From those input errors every
// candidate's score gets a bound, and a differing pick is accepted only as a
// near-tie that the bound explains; it is counted and reported.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/tile.hpp"
#include "runtime/check.hpp"
#include "runtime/index_algorithm.hpp"
#include "runtime/layouts.hpp"
#include "runtime/reference_layer.hpp"
#include "runtime/seed.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

// Q (query head) or K (KV head) element (tensor, batch, global position, head, d).
using QKElement = std::function<float(InputTensor, int64_t b, int64_t pos, int head, int64_t d)>;
struct QKSource {
  QKElement value;  // bf16-exact
  QKElement error;  // how far the run's value may lie from it (absolute); empty: exact
};
// The attention scopes: the seeded inputs (seed.hpp), exact.
QKSource seeded_qk(uint64_t seed);
// The layer scope: bf16 of RMSNorm(x) W_qkv in fp32 (dense_layer.hpp's functions, the
// seeded x and weights). A run's fp32 sum differs from it by at most 2 γ_k Σ|x||w|
// (any summation order, k = hidden); where that interval crosses a bf16 rounding
// boundary the run's bf16 value may be the neighbour, and the error is their distance.
QKSource layer_qk(const LayerProblem& p);

struct ReferenceIndex {
  int64_t batch = 1;
  int heads = 0;                                // the model's query heads
  std::vector<kernels::SparseIndex> per_batch;  // the reference's picks, over the global heads
  struct Scores {                               // one (batch, head): per candidate
    std::vector<double> v, v_error;             // verticals: per key position
    std::vector<double> s, s_error;             // slashes: per offset q - k
  };
  std::vector<Scores> scores;  // [batch x heads]
  index_alg::Selection selection;  // with the layer's budgets
  bool exact = true;               // no input error: every pick must be identical
};

// The index every layer-`layer` forward builds, for every batch element and global
// query head, with its candidates' scores and their bounds.
ReferenceIndex reference_index(const schedule::Schedule& s, const Experiment& e, const Layouts& l,
                               const schedule::CommMatching& m, const QKSource& qk, int layer);

// Every rank's pack_built() messages ("" for none) assembled over the global heads.
// Ranks that hold the same heads (a context group) must report the same picks:
// `disagreements` counts the (batch, head)s where they do not. Throws
// std::runtime_error on a malformed message or a head no rank reported.
struct BuiltIndex {
  std::vector<kernels::SparseIndex> per_batch;
  int64_t disagreements = 0;
};
BuiltIndex unpack_built_index(const std::vector<std::string>& packed, int64_t batch, int heads);

// One list of picks (positions or offsets, any order) against the reference's, with
// the reference's scores and bounds per candidate. `tie`: they differ, but every
// pick that differs could be the reference's under scores within the bounds (it is
// no weaker than the weakest reference pick, or no stronger than the strongest
// left out, each moved by its bound), and so could the count (top-p: the running
// share's cut, the sums moved by their bounds); `ties` gets the picks that differ.
enum class PickMatch : uint8_t { same, tie, wrong };
PickMatch compare_picks(std::vector<int32_t> got, std::vector<int32_t> want, std::span<const double> score,
                        std::span<const double> bound, bool top_p, int64_t slots, int64_t& ties);

// The `index` line of --check: max_rel_error is the share of (batch, head)s whose
// picks differ other than at a near-tie, or whose ranks disagree (bound 0);
// `note` counts the near-ties accepted.
TensorCheck check_built_index(const ReferenceIndex& ref, const BuiltIndex& built);

}  // namespace rm::runtime
