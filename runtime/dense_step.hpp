// The parts of a training step outside the decoder layers, as the cpu backend
// executes them for real with tp = 1 (docs/runtime-check.md, "The step scope"):
// the embedding lookup from seeded token ids, the final RMSNorm, the LM head
// GEMM, softmax cross-entropy and their backward, the embedding's gradient
// scatter and AdamW (its state kept here: the Schedule declares no optimizer
// buffers). The layers are dense_layer.hpp's; the gradient collectives and ZeRO
// gathers move real data in the backend. Also the step's seeded inputs (token
// ids, targets, the embedding's parameters: pure functions of the seed), the
// row kernels shared with reference_step.hpp, and what --check reads back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/buffer_instances.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/tensor_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

// Where each parameter of the flat `embed.weights` buffer lies (tp = 1): the
// embedding table [vocab x hidden], the LM head [vocab x hidden] when the model
// does not tie it to the table (logits = xf head^T), the final norm [hidden].
// The size is the generator's tp_embed_params.
struct EmbedLayout {
  int64_t vocab = 0, hidden = 0;
  bool tied = true;
  int64_t table = 0, head = 0, norm = 0, total = 0;
  explicit EmbedLayout(const Model& m);
};

// Element `index` of embed.weights: uniform in +-1/sqrt(hidden) for the table and
// head (logits of O(1)), 1 + uniform(+-1/8) for the norm; bf16-exact.
float embed_value(const EmbedLayout& e, uint64_t seed, int64_t index);
// Token id and target (next-token label) at `position` of global sequence `sample`
// (replica d's batch row b is sample d x batch + b); uniform in [0, vocab).
int32_t token_id(uint64_t seed, int64_t sample, int64_t position, int64_t vocab);
int32_t target_id(uint64_t seed, int64_t sample, int64_t position, int64_t vocab);

// AdamW's hyper-parameters, one place for the runtime and the reference
// (Megatron's defaults but the learning rate): decoupled weight decay, bias correction.
struct AdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};
inline constexpr AdamW kAdamW{};
// Update number `step` (from 1) of fp32 master weights w with gradient g; m, v its moments.
void adamw_step(std::span<float> w, std::span<float> m, std::span<float> v, std::span<const float> g, int step,
                const AdamW& h = kAdamW);

// Softmax cross-entropy per row of [rows x vocab] logits: loss = logsumexp - logit[target];
// its backward dlogits = (softmax - onehot(target)) x scale (scale = 1 / the step's tokens).
void cross_entropy(std::span<const float> logits, std::span<const int32_t> targets, int64_t vocab,
                   std::span<float> loss);
void cross_entropy_backward(std::span<const float> logits, std::span<const int32_t> targets, int64_t vocab,
                            double scale, std::span<float> dlogits);

// Per-parameter-block: blocks 0..L-1 are the layers (WeightLayout), block L the
// embedding's (EmbedLayout). A rank's slice of a block starts at `at` (0 unless ZeRO shards it).
struct StepOutputs {
  int rank = 0;
  int64_t sample_base = 0;      // global sample of the rank's batch row 0
  std::vector<int32_t> tokens;  // global positions of its dense rows
  std::vector<float> loss;      // [batch x T]: per-token loss
  std::vector<int64_t> grad_at, param_at;     // per block
  std::vector<std::vector<float>> grad, params;  // per block: the reduced gradient, the parameters after AdamW
};
std::string pack(const StepOutputs& o);
// Throws std::runtime_error on truncated bytes.
StepOutputs unpack_step(std::string_view bytes);

class DenseStep {
 public:
  // Recognises the step's ops outside the layers on `rank` (none with tp > 1 or
  // outside the step scope). Throws ScheduleError naming the op or buffer when a
  // recognised op lacks a buffer its semantics need or a size is not the model's.
  DenseStep(const schedule::Schedule& s, const Experiment& e, const DenseLayer& layer, int rank);

  bool active() const { return !ops_.empty(); }
  bool runs(schedule::OpId op) const { return size_t(op) < kind_.size() && kind_[size_t(op)] != Kind::none; }
  // Executes a recognised op (AdamW advances its state: one step per call).
  void run(schedule::OpId op, TensorStore& store);
  // Seeds embed.weights and, with ZeRO, every parameter shard (the rank's slice of the seeded values).
  void seed(TensorStore& store, uint64_t seed);
  StepOutputs read_outputs(TensorStore& store) const;

 private:
  enum class Kind : uint8_t { none, embed, final_norm, lm_head, loss, loss_bwd, lm_head_bwd, final_norm_bwd, embed_bwd, adamw };
  struct Op {
    schedule::OpId id = -1;
    std::vector<int> reads, writes;
  };
  // Elements [at, at + n) of copy `copy` of buffer b as fp32 (n < 0: to its end).
  std::vector<float> load(int b, int copy, TensorStore& store, int64_t at = 0, int64_t n = -1) const;
  void store_to(int b, int copy, std::span<const float> v, TensorStore& store) const;
  int find(const std::vector<int>& ids, std::string_view name) const;
  int find_x(const std::vector<int>& ids) const;
  void adamw(const Op& op, TensorStore& store);
  static std::string fmt_buffer(const schedule::Schedule& s, int b);  // "rank R: buffer NAME"

  const schedule::Schedule& s_;
  const DenseLayer& layer_;
  int rank_;
  WeightLayout w_;
  EmbedLayout em_;
  int layers_ = 0, position_ = 0, replicas_ = 1, zero_ = 0;
  int64_t batch_ = 1, sample_base_ = 0, step_tokens_ = 1;
  std::vector<int32_t> ids_, targets_;  // per dense row
  std::vector<Kind> kind_;
  std::vector<Op> ops_;
  std::vector<int> op_at_;
  // Buffers by role: -1 where the Schedule has none.
  int embed_w_ = -1, embed_g_ = -1, embed_ws_ = -1, embed_gs_ = -1, layer_w_ = -1, layer_g_ = -1, layer_ws_ = -1,
      layer_gs_ = -1;
  // AdamW: per updated (buffer, copy) its fp32 master, moments; the step count.
  struct State {
    std::vector<float> w, m, v;
  };
  std::vector<State> state_;  // blocks 0..L
  int steps_ = 0;
};

}  // namespace rm::runtime
