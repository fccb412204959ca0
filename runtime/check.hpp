// --check: the ranks' outputs against the single-process reference. Rank 0
// assembles every rank's output slices (inputs.hpp) into the global O, LSE,
// dQ, dK and dV — each element exactly once, or the layouts are wrong and it
// says so — and compares each with reference.hpp's on the same seeded inputs.
// The error of a tensor is max|got - ref| / max|ref| (docs/runtime-check.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/tile.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/dense_step.hpp"
#include "runtime/inputs.hpp"
#include "runtime/reference.hpp"
#include "runtime/reference_layer.hpp"
#include "runtime/reference_step.hpp"
#include "sim/config/experiment.hpp"

namespace rm::runtime {

// The bound of a tensor that never passes through bf16 on its way (with seeded
// bf16-exact inputs: LSE, and dV when dK|dV stay fp32). Its noise is ~5e-7, while a
// lost ring step moves it by > 4e-3 even at cp = 32 — where the bf16 bound (2e-2)
// would miss it (docs/runtime-check.md, "The bound").
inline constexpr double kFp32PathBound = 1e-4;

// The bound of the parameters after AdamW in the step scope: max |got - AdamW(w0, g)| /
// max |AdamW(w0, g) - w0|, g the gradient the rank reduced (itself checked against the
// reference). The same arithmetic on the same values: a correct run matches exactly,
// a lost update or a missed ZeRO gather is off by a whole update (docs/runtime-check.md,
// "The step scope"). Against the reference's own gradient Adam's first step (~ -lr
// sign(g)) would flip wherever g is within the noise of 0.
inline constexpr double kUpdateBound = 1e-6;
// The step's weight gradients are held to this x the bf16 bound (5e-2 by default):
// they pass through more bf16 storage than the layer's (the LM head's dlogits, two
// layers of bf16 dx, bf16 wgrad summed in a bf16 collective). Measured noise up to
// 1.1e-2; a lost ring step or a skipped reduction moves them by 0.35 or more.
inline constexpr double kStepGradientFactor = 2.5;

struct TensorCheck {
  std::string name;  // "O", "LSE", "dQ", "dK", "dV", ...
  int64_t elements = 0;
  double max_abs_error = 0, max_ref = 0, max_rel_error = 0;
  double bound = 0;  // what this tensor may reach
  std::string note{};  // what the line adds (the index: its near-ties), "" when nothing
  bool passed() const { return max_rel_error <= bound; }
};

struct CheckReport {
  std::vector<TensorCheck> tensors;
  double bound = 0;  // the bf16 bound (--check-bound); some tensors have a tighter one
  bool passed() const;
};

struct CheckProblem {
  int64_t batch = 1, seq_len = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true, backward = true;
  uint64_t seed = 1;
  kernels::SparseIndex index;  // dense, or per global query head
  // A built index: the run's own picks per batch element (the reference attention runs
  // on the mask the run ran; index_reference.hpp checks the picks themselves).
  std::vector<kernels::SparseIndex> per_batch;
  bool built = false;          // the index was built at run time (index_build ops): it is checked too
  // Attention scopes: LSE, and dV when every dK|dV buffer is fp32, are held to kFp32PathBound.
  bool tight_lse = false, tight_dv = false;
  // The layer scope (check_layer): the dense sizes and the layer checked.
  bool layer = false;
  int64_t hidden = 0, intermediate = 0;
  int layer_index = 0;
  // The step scope (check_step): the whole step's problem; index and the attention's flags unused.
  std::optional<StepProblem> step;
};

// Throws std::runtime_error when the slices overlap, leave elements uncovered or
// lie outside the problem.
CheckReport check_attention(const CheckProblem& p, const std::vector<OutputSlice>& slices, double bound);
// The same against a given reference (the attention inside a layer).
CheckReport check_attention_against(const CheckProblem& p, const std::vector<OutputSlice>& slices,
                                    const ReferenceResult& ref, double bound);
// The reference layer's problem for p (its sizes, seed, layer and index).
LayerProblem layer_problem(const CheckProblem& p);
// The layer scope: the attention's tensors as above, plus the layer output y,
// its input gradient dx (each token row from exactly one rank) and the GEMM
// weight gradients (summed over the ranks: no reduction in the Schedule),
// against reference_layer.hpp on the same seed.
CheckReport check_layer(const CheckProblem& p, const std::vector<OutputSlice>& slices,
                        const std::vector<DenseOutputs>& dense, double bound);

// The step scope: the per-token loss (each token from exactly one rank), every
// weight gradient after the replicas' reduction (each rank's copy, or the ZeRO
// shards assembled) against reference_step.hpp on the same seed within
// kStepGradientFactor x `bound`,
// and every parameter after AdamW within kUpdateBound. The GEMM weights are reported
// per kind over every layer (dW_qkv, ...; after AdamW W_qkv', ...), the embedding as
// dE and E' (dW_head, W_head' when untied), the norm weights (no gradient) as norm1', norm2', norm_f'.
CheckReport check_step(const StepProblem& p, const std::vector<StepOutputs>& ranks, double bound);

}  // namespace rm::runtime
