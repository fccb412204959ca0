#include "runtime/dense_step.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "kernels/bf16.hpp"
#include "runtime/dense_math.hpp"
#include "runtime/seed.hpp"
#include "runtime/wire.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::DType;
using schedule::OpKind;
using schedule::Phase;

EmbedLayout::EmbedLayout(const Model& m) : vocab(m.vocab), hidden(m.hidden), tied(m.tied_embeddings) {
  table = 0;
  head = tied ? table : table + vocab * hidden;
  norm = head + vocab * hidden;
  total = norm + hidden;
}

namespace {

// Seeds of the step's own value streams (input_value's hash on seed ^ domain).
constexpr uint64_t kEmbedDomain = 0x454d424544444e47ull, kTokenDomain = 0x544f4b454e494453ull,
                   kTargetDomain = 0x5441524745545321ull;

uint64_t mix(uint64_t x) {  // splitmix64's finaliser (seed.cpp's, for integer draws)
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
int32_t draw(uint64_t seed, int64_t sample, int64_t position, int64_t vocab) {
  const uint64_t h = mix(mix(mix(seed) ^ uint64_t(sample)) ^ uint64_t(position));
  return int32_t((h >> 11) % uint64_t(vocab));
}

}  // namespace

float embed_value(const EmbedLayout& e, uint64_t seed, int64_t index) {
  const float u = input_value(seed ^ kEmbedDomain, InputTensor::q, 0, index, 0, 0);
  if (index >= e.norm) return kernels::round_bf16(1.f + u / 8.f);
  return kernels::round_bf16(u / std::sqrt(float(e.hidden)));
}

int32_t token_id(uint64_t seed, int64_t sample, int64_t position, int64_t vocab) {
  return draw(seed ^ kTokenDomain, sample, position, vocab);
}
int32_t target_id(uint64_t seed, int64_t sample, int64_t position, int64_t vocab) {
  return draw(seed ^ kTargetDomain, sample, position, vocab);
}

void adamw_step(std::span<float> w, std::span<float> m, std::span<float> v, std::span<const float> g, int step,
                const AdamW& h) {
  const double c1 = 1.0 - std::pow(h.beta1, step), c2 = 1.0 - std::pow(h.beta2, step);
  for (size_t i = 0; i < w.size(); ++i) {
    const double gi = g[i];
    const double mi = h.beta1 * m[i] + (1 - h.beta1) * gi, vi = h.beta2 * v[i] + (1 - h.beta2) * gi * gi;
    m[i] = float(mi), v[i] = float(vi);
    w[i] = float(w[i] - h.lr * ((mi / c1) / (std::sqrt(vi / c2) + h.eps) + h.weight_decay * w[i]));
  }
}

// Row by row: the max, then exp(z - max) in fp32 summed in fp64 (the CPU's cost is the exp).
void cross_entropy(std::span<const float> logits, std::span<const int32_t> targets, int64_t vocab,
                   std::span<float> loss) {
  for (size_t r = 0; r < targets.size(); ++r) {
    const float* z = logits.data() + r * size_t(vocab);
    const float mx = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(z[i] - mx);
    loss[r] = float(mx + std::log(sum) - z[targets[r]]);
  }
}

void cross_entropy_backward(std::span<const float> logits, std::span<const int32_t> targets, int64_t vocab,
                            double scale, std::span<float> dlogits) {
  std::vector<float> e(static_cast<size_t>(vocab));
  for (size_t r = 0; r < targets.size(); ++r) {
    const float* z = logits.data() + r * size_t(vocab);
    float* d = dlogits.data() + r * size_t(vocab);
    const float mx = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += (e[size_t(i)] = std::exp(z[i] - mx));
    const float f = float(scale / sum);
    for (int64_t i = 0; i < vocab; ++i) d[i] = e[size_t(i)] * f;
    d[targets[r]] -= float(scale);
  }
}

// ---- packing -------------------------------------------------------------------------

using wire::append;
using wire::append_vec;

std::string pack(const StepOutputs& o) {
  std::string s;
  append(s, int32_t(o.rank));
  append(s, o.sample_base);
  append_vec(s, o.tokens);
  append_vec(s, o.loss);
  append_vec(s, o.grad_at);
  append_vec(s, o.param_at);
  append(s, int32_t(o.grad.size()));
  for (size_t i = 0; i < o.grad.size(); ++i) append_vec(s, o.grad[i]), append_vec(s, o.params.at(i));
  return s;
}

StepOutputs unpack_step(std::string_view bytes) {
  wire::Reader r{bytes, "step outputs"};
  StepOutputs o;
  o.rank = r.take<int32_t>();
  o.sample_base = r.take<int64_t>();
  o.tokens = r.take_vec<int32_t>();
  o.loss = r.take_vec<float>();
  o.grad_at = r.take_vec<int64_t>();
  o.param_at = r.take_vec<int64_t>();
  const int32_t n = r.take<int32_t>();
  for (int32_t i = 0; i < n; ++i) o.grad.push_back(r.take_vec<float>()), o.params.push_back(r.take_vec<float>());
  return o;
}

// ---- the step on the Schedule's buffers ---------------------------------------------------

DenseStep::DenseStep(const schedule::Schedule& s, const Experiment& e, const DenseLayer& layer, int rank)
    : s_(s), layer_(layer), rank_(rank), w_(e.model), em_(e.model), layers_(e.model.layers),
      zero_(e.parallel.zero_stage), batch_(e.workload.batch) {
  kind_.assign(s.ops.size(), Kind::none);
  op_at_.assign(s.ops.size(), -1);
  if (e.scope != Scope::step || e.parallel.tp != 1 || !layer.active()) return;
  const int world = e.parallel.world();
  replicas_ = e.parallel.replicas();
  // Every placement numbers the GPUs data-parallel rank major (device_map.hpp): gpu = d x (world / dp) + ...
  sample_base_ = int64_t(rank / std::max(1, world / e.parallel.dp)) * batch_;
  step_tokens_ = int64_t(e.parallel.dp) * batch_ * e.workload.seq_len;
  position_ = rank;  // tp = 1: the replica group is the world, in rank order
  for (const auto& g : s.groups)
    if (g.name == "world")
      position_ = int(std::find(g.ranks.begin(), g.ranks.end(), rank) - g.ranks.begin());
  for (const auto& b : s.buffers) {
    if (b.rank != rank) continue;
    int* slot = b.name == "embed.weights"         ? &embed_w_
                : b.name == "embed.wgrad"         ? &embed_g_
                : b.name == "embed.weights.shard" ? &embed_ws_
                : b.name == "embed.wgrad.shard"   ? &embed_gs_
                : b.name == "weights"             ? &layer_w_
                : b.name == "wgrad"               ? &layer_g_
                : b.name == "weights.shard"       ? &layer_ws_
                : b.name == "wgrad.shard"         ? &layer_gs_
                                                  : nullptr;
    if (slot) *slot = b.id;
  }
  const auto& T = layer.tokens();
  ids_.assign(size_t(batch_) * T.size(), 0);  // drawn in seed(), with the run's seed
  targets_.assign(ids_.size(), 0);
  for (const auto& op : s.ops) {
    if (op.rank != rank || op.layer >= 0 || (op.kind != OpKind::gemm && op.kind != OpKind::elementwise)) continue;
    const schedule::Access* a = s.access_of(op);
    if (!a) continue;
    const auto& R = a->reads;
    const auto& W = a->writes;
    const bool gemm = op.kind == OpKind::gemm;
    Kind k = Kind::none;
    if (op.phase == Phase::optimizer) k = Kind::adamw;
    else if (op.phase == Phase::forward) {
      if (!gemm && find(R, "embed.weights") >= 0 && find_x(W) >= 0) k = Kind::embed;
      else if (!gemm && find(W, "xf") >= 0) k = Kind::final_norm;
      else if (gemm && find(W, "logits") >= 0) k = Kind::lm_head;
      else if (!gemm && find(W, "loss") >= 0) k = Kind::loss;
    } else if (op.phase == Phase::backward) {
      if (!gemm && find(W, "dlogits") >= 0) k = Kind::loss_bwd;
      else if (gemm && find(R, "dlogits") >= 0) k = Kind::lm_head_bwd;
      else if (!gemm && find(R, "dxf") >= 0) k = Kind::final_norm_bwd;
      else if (!gemm && find(W, "embed.wgrad") >= 0) k = Kind::embed_bwd;
    }
    if (k == Kind::none) continue;
    kind_[size_t(op.id)] = k;
    op_at_[size_t(op.id)] = int(ops_.size());
    ops_.push_back({op.id, R, W});
  }
  if (ops_.empty()) return;
  auto need = [&](int b, const char* what, int64_t elements) {
    if (b < 0) throw schedule::ScheduleError("rank " + std::to_string(rank) + ": the step has no " + what + " buffer");
    if (s.buffers[size_t(b)].elements() != elements)
      throw schedule::ScheduleError(fmt_buffer(s, b) + " holds " + std::to_string(s.buffers[size_t(b)].elements()) +
                                    " elements; expected " + std::to_string(elements));
  };
  need(embed_w_, "embed.weights", em_.total);
  need(embed_g_, "embed.wgrad", em_.total);
  need(layer_w_, "weights", w_.total);
  need(layer_g_, "wgrad", w_.total);
  if (zero_ >= 1 && replicas_ > 1) {
    if (w_.total % replicas_ || em_.total % replicas_)
      throw schedule::ScheduleError(fmt_buffer(s, layer_ws_ >= 0 ? layer_ws_ : layer_w_) +
                                    ": ZeRO shards of unequal size (the parameters do not divide by the " +
                                    std::to_string(replicas_) + " replicas): the collectives' blocks would not line up");
    need(embed_ws_, "embed.weights.shard", em_.total / replicas_);
    need(embed_gs_, "embed.wgrad.shard", em_.total / replicas_);
    need(layer_ws_, "weights.shard", w_.total / replicas_);
    need(layer_gs_, "wgrad.shard", w_.total / replicas_);
  }
  const int64_t rows = batch_ * int64_t(T.size());
  for (const Op& o : ops_) {
    const Kind k = kind_[size_t(o.id)];
    auto want = [&](int b, const char* name, int64_t width) {
      if (b < 0)
        throw schedule::ScheduleError(schedule::describe(s, o.id) + ": a step op without its " + name + " buffer");
      if (s.buffers[size_t(b)].elements() != rows * width)
        throw schedule::ScheduleError(schedule::describe(s, o.id) + ": buffer " + name + " holds " +
                                      std::to_string(s.buffers[size_t(b)].elements()) + " elements; expected " +
                                      std::to_string(rows) + " dense rows x " + std::to_string(width));
    };
    const int64_t H = em_.hidden, V = em_.vocab;
    switch (k) {
      case Kind::embed: want(find_x(o.writes), "x0", H); break;
      case Kind::final_norm: want(find_x(o.reads), "x{L}", H), want(find(o.writes, "xf"), "xf", H); break;
      case Kind::lm_head: want(find(o.reads, "xf"), "xf", H), want(find(o.writes, "logits"), "logits", V); break;
      case Kind::loss: want(find(o.reads, "logits"), "logits", V), want(find(o.writes, "loss"), "loss", 1); break;
      case Kind::loss_bwd: want(find(o.reads, "logits"), "logits", V), want(find(o.writes, "dlogits"), "dlogits", V); break;
      case Kind::lm_head_bwd: want(find(o.reads, "xf"), "xf", H), want(find(o.writes, "dxf"), "dxf", H); break;
      case Kind::final_norm_bwd: want(find_x(o.reads), "x{L}", H), want(find(o.writes, "dx"), "dx", H); break;
      case Kind::embed_bwd: want(find(o.reads, "dx"), "dx", H); break;
      case Kind::adamw:
      case Kind::none: break;
    }
  }
  state_.resize(size_t(layers_ + 1));
}

std::string DenseStep::fmt_buffer(const schedule::Schedule& s, int b) {
  return "rank " + std::to_string(s.buffers[size_t(b)].rank) + ": buffer " + s.buffers[size_t(b)].name;
}

int DenseStep::find(const std::vector<int>& ids, std::string_view name) const {
  for (int b : ids)
    if (s_.buffers[size_t(b)].name == name) return b;
  return -1;
}

int DenseStep::find_x(const std::vector<int>& ids) const {
  for (int b : ids)
    if (is_layer_input(s_.buffers[size_t(b)].name)) return b;
  return -1;
}

std::vector<float> DenseStep::load(int b, int copy, TensorStore& store, int64_t at, int64_t n) const {
  const auto buf = store.bytes(b, copy);
  const DType t = s_.buffers[size_t(b)].dtype;
  const int64_t have = int64_t(buf.size()) / schedule::dtype_bytes(t);
  const int64_t count = n < 0 ? have - at : std::min(n, have - at);
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(count, 0)));
  // Whole-buffer conversions (8M-element embedding tables): inline, not element_get per element.
  if (t == DType::fp32) std::memcpy(v.data(), buf.data() + at * 4, v.size() * 4);
  else
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = kernels::from_bf16(reinterpret_cast<const kernels::bf16_bits*>(buf.data())[at + int64_t(i)]);
  return v;
}

void DenseStep::store_to(int b, int copy, std::span<const float> v, TensorStore& store) const {
  auto buf = store.bytes(b, copy);
  const DType t = s_.buffers[size_t(b)].dtype;
  const size_t n = std::min(v.size(), buf.size() / size_t(schedule::dtype_bytes(t)));
  if (t == DType::fp32) std::memcpy(buf.data(), v.data(), n * 4);
  else
    for (size_t i = 0; i < n; ++i) reinterpret_cast<kernels::bf16_bits*>(buf.data())[i] = kernels::to_bf16(v[i]);
}

void DenseStep::run(schedule::OpId id, TensorStore& store) {
  const Op& op = ops_.at(size_t(op_at_.at(size_t(id))));
  const int64_t H = em_.hidden, V = em_.vocab, rows = int64_t(ids_.size());
  auto norm_weights = [&] { return load(embed_w_, 0, store, em_.norm, H); };
  switch (kind_[size_t(id)]) {
    case Kind::embed: {
      const auto e = load(embed_w_, 0, store, em_.table, V * H);
      std::vector<float> x(static_cast<size_t>(rows * H));
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(e.begin() + em_.table + ids_[size_t(r)] * H, H, x.begin() + r * H);
      store_to(find_x(op.writes), 0, x, store);
      break;
    }
    case Kind::final_norm: {
      const auto x = load(find_x(op.reads), 0, store), w = norm_weights();
      std::vector<float> y(x.size());
      rms_norm(x, w, y, H);
      store_to(find(op.writes, "xf"), 0, y, store);
      break;
    }
    case Kind::lm_head: {
      const auto x = load(find(op.reads, "xf"), 0, store), e = load(embed_w_, 0, store, em_.head, V * H);
      std::vector<float> z(static_cast<size_t>(rows * V));
      sgemm(false, true, rows, V, H, x.data(), e.data(), 0.f, z.data());
      store_to(find(op.writes, "logits"), 0, z, store);
      break;
    }
    case Kind::loss: {
      const auto z = load(find(op.reads, "logits"), 0, store);
      std::vector<float> loss(static_cast<size_t>(rows));
      cross_entropy(z, targets_, V, loss);
      store_to(find(op.writes, "loss"), 0, loss, store);
      break;
    }
    case Kind::loss_bwd: {
      const auto z = load(find(op.reads, "logits"), 0, store);
      std::vector<float> dz(z.size());
      cross_entropy_backward(z, targets_, V, 1.0 / double(step_tokens_), dz);
      store_to(find(op.writes, "dlogits"), 0, dz, store);
      break;
    }
    case Kind::lm_head_bwd: {
      // The first writer of embed.wgrad in the step: it starts the embedding's gradient.
      const auto dz = load(find(op.reads, "dlogits"), 0, store), x = load(find(op.reads, "xf"), 0, store),
                 e = load(embed_w_, 0, store, em_.head, V * H);
      std::vector<float> dx(static_cast<size_t>(rows * H)), g(static_cast<size_t>(em_.total), 0.f);
      sgemm(false, false, rows, H, V, dz.data(), e.data(), 0.f, dx.data());
      sgemm(true, false, V, H, rows, dz.data(), x.data(), 0.f, g.data() + em_.head);
      store_to(find(op.writes, "dxf"), 0, dx, store);
      store_to(embed_g_, 0, g, store);
      break;
    }
    case Kind::final_norm_bwd: {
      const auto dy = load(find(op.reads, "dxf"), 0, store), x = load(find_x(op.reads), 0, store), w = norm_weights();
      std::vector<float> dx(x.size());
      rms_norm_backward(x, w, dy, {}, dx, H);
      store_to(find(op.writes, "dx"), 0, dx, store);
      break;
    }
    case Kind::embed_bwd: {
      const auto dx = load(find(op.reads, "dx"), 0, store);
      auto g = load(embed_g_, 0, store);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t f = 0; f < H; ++f) g[size_t(em_.table + ids_[size_t(r)] * H + f)] += dx[size_t(r * H + f)];
      store_to(embed_g_, 0, g, store);
      break;
    }
    case Kind::adamw: adamw(op, store); break;
    case Kind::none: break;
  }
}

// Every layer's block (copy c of the per-layer buffers) and the embedding's, on
// the rank's shard with ZeRO: fp32 masters from the buffer at the first step.
void DenseStep::adamw(const Op& op, TensorStore& store) {
  ++steps_;
  const bool sharded = zero_ >= 1 && replicas_ > 1;
  for (int c = 0; c <= layers_; ++c) {
    const bool embed = c == layers_;
    const int wb = embed ? (sharded ? embed_ws_ : embed_w_) : (sharded ? layer_ws_ : layer_w_);
    const int gb = embed ? (sharded ? embed_gs_ : embed_g_) : (sharded ? layer_gs_ : layer_g_);
    if (!std::count(op.writes.begin(), op.writes.end(), wb) || !std::count(op.reads.begin(), op.reads.end(), gb))
      throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": the optimizer does not read " +
                                    s_.buffers[size_t(gb)].name + " and write " + s_.buffers[size_t(wb)].name);
    const int copy = embed ? 0 : c;
    State& st = state_[size_t(c)];
    if (st.w.empty()) {
      st.w = load(wb, copy, store);
      st.m.assign(st.w.size(), 0.f), st.v.assign(st.w.size(), 0.f);
    }
    adamw_step(st.w, st.m, st.v, load(gb, copy, store), steps_);
    store_to(wb, copy, st.w, store);
  }
}

void DenseStep::seed(TensorStore& store, uint64_t seed) {
  if (!active()) return;
  const auto& T = layer_.tokens();
  for (int64_t b = 0, r = 0; b < batch_; ++b)
    for (int32_t t : T) {
      ids_[size_t(r)] = token_id(seed, sample_base_ + b, t, em_.vocab);
      targets_[size_t(r++)] = target_id(seed, sample_base_ + b, t, em_.vocab);
    }
  std::vector<float> e(static_cast<size_t>(em_.total));
  for (int64_t i = 0; i < em_.total; ++i) e[size_t(i)] = embed_value(em_, seed, i);
  store_to(embed_w_, 0, e, store);
  if (!(zero_ >= 1 && replicas_ > 1)) return;
  const int64_t es = em_.total / replicas_, ws = w_.total / replicas_;
  store_to(embed_ws_, 0, std::span<const float>(e).subspan(size_t(position_ * es), size_t(es)), store);
  std::vector<float> w(static_cast<size_t>(ws));
  for (int c = 0; c < layers_; ++c) {
    for (int64_t i = 0; i < ws; ++i) w[size_t(i)] = weight_value(w_, seed, c, position_ * ws + i);
    store_to(layer_ws_, c, w, store);
  }
}

StepOutputs DenseStep::read_outputs(TensorStore& store) const {
  StepOutputs o;
  o.rank = rank_;
  o.sample_base = sample_base_;
  o.tokens = layer_.tokens();
  for (const Op& op : ops_)
    if (kind_[size_t(op.id)] == Kind::loss) o.loss = load(find(op.writes, "loss"), 0, store);
  const bool sharded = zero_ >= 1 && replicas_ > 1;
  for (int c = 0; c <= layers_; ++c) {
    const bool embed = c == layers_;
    const int copy = embed ? 0 : c;
    const int64_t shard = (embed ? em_.total : w_.total) / replicas_;
    const int g = embed ? (sharded ? embed_gs_ : embed_g_) : (sharded ? layer_gs_ : layer_g_);
    // ZeRO 3 keeps the updated parameters in the shards (the next step gathers them); 1 and 2 gather them back.
    const bool shard_params = sharded && zero_ == 3;
    const int w = embed ? (shard_params ? embed_ws_ : embed_w_) : (shard_params ? layer_ws_ : layer_w_);
    o.grad_at.push_back(sharded ? position_ * shard : 0);
    o.param_at.push_back(shard_params ? position_ * shard : 0);
    o.grad.push_back(load(g, copy, store));
    o.params.push_back(load(w, copy, store));
  }
  return o;
}

}  // namespace rm::runtime
