// The dense parts of a decoder layer as the cpu backend executes them for real
// (docs/runtime-check.md, "The layer scope"): RMSNorm, the QKV / O / gate-up /
// down GEMMs with their residuals, SwiGLU, forward and backward, on the
// Schedule's own buffers. The QKV GEMM scatters its rows into the attention's
// stage-0 Q and K|V (their layouts say which token and head each row and
// column is), the O projection gathers from O the same way; the backward
// GEMMs write dX and add dW into the layer's `wgrad`. Also what the layer's
// inputs are (x of the first layer, dY of the last, the weights: pure
// functions of the seed) and what --check reads back. tp = 1 only: with
// tp > 1 nothing is recognised and those ops stay timing-only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/buffer_instances.hpp"
#include "runtime/layouts.hpp"
#include "runtime/tensor_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

inline constexpr float kRmsNormEps = 1e-6f;

// Where each parameter of one layer's flat `weights` (and `wgrad`) buffer lies,
// with tp = 1: norm1 [hidden], W_qkv [hidden x (q + 2 kv)] (columns: query heads,
// then K heads, then V heads, head-major, head_dim inner), W_o [q x hidden],
// norm2 [hidden], W_gu [hidden x 2I] (gate columns, then up), W_down [I x hidden];
// all row-major [in x out]. q = heads x head_dim, kv = kv_heads x head_dim.
struct WeightLayout {
  int64_t hidden = 0, q = 0, kv = 0, inter = 0;
  int64_t norm1 = 0, qkv = 0, o = 0, norm2 = 0, gu = 0, down = 0, total = 0;  // offsets; total elements
  explicit WeightLayout(const Model& m);
  int64_t qkv_width() const { return q + 2 * kv; }
  // Inputs of the GEMM whose weight holds element `index`; 0 for a norm weight.
  int64_t fan_in(int64_t index) const;
};

// Element `index` of layer `layer`'s weights: uniform in +-1/sqrt(fan_in) for
// the GEMM weights, 1 + uniform(+-1/8) for the norms; bf16-exact.
float weight_value(const WeightLayout& w, uint64_t seed, int layer, int64_t index);

// The layer's seeded activations: x entering the first layer, dY entering the
// last layer's backward. Element (b, token, feature), token global; uniform in
// [-1, 1), bf16-exact (seed.hpp's hash on a seed of their own).
enum class DenseInput : uint8_t { x, dy };
float dense_input_value(uint64_t seed, DenseInput t, int64_t b, int64_t token, int64_t feature);

// Element i of a bf16 or fp32 buffer as fp32, and back (rounded to bf16 when the buffer is).
float element_get(std::span<const std::byte> buf, schedule::DType t, int64_t i);
void element_put(std::span<std::byte> buf, schedule::DType t, int64_t i, float v);

// Row-wise kernels on [rows x width] fp32 data, shared with the reference.
// y = x / rms(x) * w, rms(x) = sqrt(mean(x^2) + eps).
void rms_norm(std::span<const float> x, std::span<const float> w, std::span<float> y, int64_t width);
// dx = residual + d/dx (norm(x) . dy) for the norm weights w (held constant).
void rms_norm_backward(std::span<const float> x, std::span<const float> w, std::span<const float> dy,
                       std::span<const float> residual, std::span<float> dx, int64_t width);
// gu rows are [gate (I) | up (I)]: act = silu(gate) * up.
void swiglu(std::span<const float> gu, std::span<float> act, int64_t inter);
void swiglu_backward(std::span<const float> gu, std::span<const float> dact, std::span<float> dgu, int64_t inter);

// What --check reads back from one rank: its dense rows (row b x T + t holds
// global token tokens[t] of batch b) and its layer's weight gradient.
struct DenseOutputs {
  int rank = 0;
  int layer = 0;
  std::vector<int32_t> tokens;
  std::vector<float> y, dx;  // [batch x T][hidden]: the layer's output; the gradient of its input (backward)
  std::vector<float> wgrad;  // [WeightLayout::total]; empty without a backward
};
std::string pack(const DenseOutputs& d);
// Throws std::runtime_error on truncated bytes.
DenseOutputs unpack_dense(std::string_view bytes);

class DenseLayer {
 public:
  // Recognises the dense ops of `rank` (none with tp > 1). Throws ScheduleError
  // naming the op or buffer when a recognised op lacks a buffer its semantics
  // need, the weights buffer's size is not the model's, or the dense rows do
  // not match the attention's stage-0 layout.
  DenseLayer(const schedule::Schedule& s, const Experiment& e, const Layouts& l, const BufferInstances& in, int rank);

  bool active() const { return !ops_.empty(); }
  bool runs(schedule::OpId op) const { return size_t(op) < kind_.size() && kind_[size_t(op)] != Kind::none; }
  // The dense rows: row b x T + t holds global token tokens()[t] of batch row b.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Executes a recognised op on `store` (ops on other streams may run at once:
  // the Schedule orders every access to a buffer).
  void run(schedule::OpId op, TensorStore& store) const;
  // Seeds the weights of every layer, and x / dY where their first access is a read.
  void seed(TensorStore& store, uint64_t seed) const;
  // dY again: in the layer scope one `dx` buffer is both the incoming gradient and
  // the layer's input gradient, so without this each iteration would start from
  // the last one's dx (and the values grow ~2x per iteration).
  void reseed_gradient(TensorStore& store, uint64_t seed) const;
  // The layer's output and input gradient and its wgrad (the last layer's).
  DenseOutputs read_outputs(TensorStore& store) const;

 private:
  enum class Kind : uint8_t {
    none, norm1, qkv, o_proj, norm2, gate_up, swiglu, down,
    down_bwd, swiglu_bwd, gate_up_bwd, norm2_bwd, o_proj_bwd, qkv_bwd, norm1_bwd
  };
  // Features per row of an op's dense x, out, dy and residual buffers (0: unused).
  struct Widths {
    int64_t x = 0, out = 0, dy = 0, residual = 0;
  };
  static Widths widths(Kind k, const WeightLayout& w);
  // The buffers an op's semantics use (-1 where it has none).
  struct Op {
    schedule::OpId id = -1;
    int layer = 0;
    // dense: the input (the forward's X for a backward GEMM), the output, the
    // incoming gradient (backward), the residual added to the output
    int x = -1, out = -1, dy = -1, weights = -1, residual = -1, wgrad = -1;
    bool zero_wgrad = false;  // the layer's first wgrad writer of an iteration clears it
    int q = -1, kv = -1, o = -1, d_o = -1, dq = -1, dkv = -1;       // attention, stage 0
  };
  // For seed and read_outputs: a buffer and the op whose copy of it counts (-1: none).
  struct Use {
    int buffer = -1;
    schedule::OpId op = -1;
  };
  void seed_rows(Use u, DenseInput what, TensorStore& store, uint64_t seed) const;
  void qkv(const Op& op, TensorStore& store) const;
  void o_proj(const Op& op, TensorStore& store) const;
  void qkv_bwd(const Op& op, TensorStore& store) const;
  void o_proj_bwd(const Op& op, TensorStore& store) const;
  void gemm_fwd(const Op& op, TensorStore& store, int64_t w_at, int64_t k, int64_t n) const;
  void gemm_bwd(const Op& op, TensorStore& store, int64_t w_at, int64_t k, int64_t n) const;
  std::span<std::byte> bytes(const Op& op, int b, TensorStore& store) const;
  std::vector<float> load(const Op& op, int b, TensorStore& store) const;
  void store_to(const Op& op, int b, std::span<const float> v, TensorStore& store) const;
  // Elements [at, at + n) of the op's weights: one parameter's block.
  std::vector<float> weights(const Op& op, int64_t at, int64_t n, TensorStore& store) const;
  void add_wgrad(const Op& op, int64_t at, std::span<const float> dw, TensorStore& store) const;
  // For an attention buffer: local element offset of (row r, column c of the q or kv block).
  int64_t at_q(int b, int64_t r, int64_t c) const;
  int64_t at_kv(int b, int part, int64_t r, int64_t c) const;

  const schedule::Schedule& s_;
  const Layouts& l_;
  const BufferInstances& in_;
  int rank_;
  WeightLayout w_;
  int64_t batch_ = 1, head_dim_ = 0;
  std::vector<int32_t> tokens_;  // the dense rows' tokens (per batch)
  std::vector<Kind> kind_;       // per op id
  std::vector<Op> ops_;          // the recognised ops
  std::vector<int> op_at_;       // op id -> index in ops_
  // Per attention buffer: local token index of each dense token, local head of each global head.
  struct Map {
    std::vector<int64_t> token, head;
  };
  std::vector<Map> maps_;  // per buffer id (empty: not mapped)
  Use x_in_, dy_in_, y_out_, dx_out_, wgrad_out_;
  int weights_ = -1;
};

}  // namespace rm::runtime
