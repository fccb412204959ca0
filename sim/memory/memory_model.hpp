// Per-GPU memory of a training step's configuration, from the Experiment alone
// (no Schedule, no topology): what `simulate` reports and what the planner
// prunes with before it generates anything, so it costs microseconds.
// The peak is the larger of two moments of the step (docs/memory.md derives
// every term): the loss (end of the forward: every layer's checkpoints held,
// the LM head and cross-entropy working) and the last layer's backward, the
// first to run (every checkpoint held, that layer recomputed under the
// checkpoint policy, its attention ring and all-to-all buffers live).
// Persistent state — bf16 weights and gradients, Adam's fp32 master weights
// and two moments (12 bytes a parameter) — is divided by ZeRO over the
// dp·hp·cp GPUs that hold the same tensor-parallel shard; activations and
// heads divide by tp. On top come the allocator's fragmentation (cluster
// gpu.fragmentation x the tensors) and the CUDA/NCCL context
// (gpu.context_GB). GB = 1e9 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/experiment.hpp"

namespace rm::memory {

// Term names, in report order; each MemoryReport holds every one of them.
inline constexpr std::string_view kWeights = "weights";            // bf16 parameters (ZeRO-3: shard + gathered layers)
inline constexpr std::string_view kGradients = "gradients";        // bf16 gradients (ZeRO >= 2: shard + buckets)
inline constexpr std::string_view kOptimizer = "optimizer_state";  // Adam: fp32 master, exp_avg, exp_avg_sq
inline constexpr std::string_view kCheckpoints = "checkpoints";    // activations every layer keeps for its backward
inline constexpr std::string_view kLayer = "layer_activations";    // one layer recomputed + its backward temporaries
inline constexpr std::string_view kAttention = "attention_buffers";  // ring slots, accumulators, partials, indices
inline constexpr std::string_view kAllToAll = "all_to_all";         // head all-to-all and shuffle staging
inline constexpr std::string_view kLoss = "loss";                   // LM head logits and cross-entropy
inline constexpr std::string_view kFragmentation = "fragmentation";  // allocator allowance
inline constexpr std::string_view kContext = "cuda_nccl_context";    // CUDA context and NCCL buffers

struct Term {
  std::string_view name;  // one of the k* names above
  int64_t bytes = 0;
};

// The two moments whose larger total is the peak.
enum class Moment { loss, layer_backward };
const char* to_string(Moment m);

struct MemoryReport {
  std::vector<Term> terms;  // every term at the peak moment, in report order; they add up to peak_bytes
  Moment peak_at = Moment::layer_backward;
  int64_t loss_bytes = 0;            // total at the loss moment
  int64_t layer_backward_bytes = 0;  // total at the last layer's backward (the first to run)
  int64_t peak_bytes = 0;            // max of the two
  int64_t capacity_bytes = 0;        // cluster gpu.memory_GB
  bool oom = false;                  // peak_bytes > capacity_bytes
  // A narrow scope (attention_fwd, attention_fwd_bwd, layer) runs far less than the
  // step above: what that scope alone holds (its tensors and buffers, no optimizer,
  // no other layer, plus the allowances) and whether it fits. For scope step, the peak.
  Scope scope = Scope::step;
  int64_t scope_bytes = 0;
  bool scope_oom = false;

  int64_t term(std::string_view name) const;  // bytes of a term at the peak; 0 when not a term name
  int64_t shortfall_bytes() const { return peak_bytes > capacity_bytes ? peak_bytes - capacity_bytes : 0; }
  double peak_GB() const { return double(peak_bytes) / 1e9; }
  double capacity_GB() const { return double(capacity_bytes) / 1e9; }
};

// The tensors of one GPU the terms are built from (bytes), exposed so tests can
// hold them against the buffers a generated Schedule declares (docs/memory.md,
// "Against the Schedule"). Attention tensors are in the ring layout (S/cp
// tokens, the heads of one head x tensor rank), dense ones in the sequence-
// parallel layout (b·S/(cp·hp) tokens, features / tp).
struct Tensors {
  int64_t q = 0;    // Q (and O, dO: one head rank's query heads, bf16)
  int64_t kv = 0;   // K and V (bf16)
  int64_t dkv = 0;  // dK and dV in parallel.grad_comm_dtype
  int64_t lse = 0;  // LSE (fp32)
  int64_t x = 0;    // one residual-stream tensor (a layer's input)
  int64_t dense_rest = 0;   // the rest of a layer's forward activations: xn1, h, hn, gu, act
  int64_t dense_grads = 0;  // the backward's temporaries: dx, dact, dgu, dhn, dh, dxn1
  int64_t o_seq = 0;        // O in the dense layout, kept with O when an exchange precedes the ring (else 0)
  int64_t index = 0;        // one layer's built index: block mask (uint8), vertical lists (int32); 0 unless dynamic
  int outer = 1, inner = 1;  // the ring: rounds x steps per round (O x I = cp)
  int64_t kv_slots = 0;      // K|V receive slots: 2 inner (I > 1) + min(3, O-1) outer
  // dK|dV: 2 inner sums (I > 1), 2 outer (O > 1), min(2, cp) step partials (cp > 1), min(2, O) round sums (O, I > 1)
  int64_t dkv_slots = 0;
  int64_t fwd_partials = 0;  // forward: the step's O, LSE and fp32 accumulators (0: the kernel merges in its epilogue)
  int64_t bwd_partials = 0;  // backward: dO, dQ's fp32 accumulator and the step's partial, the owner's dK|dV
  int exchanges = 0;         // all-to-alls between the dense and the ring layout: head (hp > 1) + shuffle (per_call)
  int64_t exchange = 0;      // staging of the backward's exchanges (the larger): exchanges x (dO, dQ, dK|dV [, Q, K|V])
  int64_t loss = 0;          // xf, dxf and one chunk's logits (bf16), their fp32 copy and bf16 gradient
  int64_t params = 0;        // parameters on this GPU (params / tp)
  int64_t layer_params = 0;  // one decoder layer's, / tp
  int64_t embed_params = 0;  // embedding, LM head and final norm, / tp
  int zero_group = 1;        // dp·hp·cp: the GPUs holding the same parameter shard
};
Tensors tensors(const Experiment& e);

MemoryReport estimate_memory(const Experiment& e);

// {"peak_GB", "capacity_GB", "oom", "shortfall_GB", "peak_at", "moments": {"loss", "layer_backward"},
//  "terms": {name: GB, ...}, "scope", "scope_GB", "scope_oom"} with GB = 1e9 bytes.
nlohmann::json to_json(const MemoryReport& r);
// A few lines: peak of capacity (fits / OUT OF MEMORY by), when, and the terms.
std::string to_text(const MemoryReport& r);

}  // namespace rm::memory
