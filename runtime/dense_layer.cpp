#include "runtime/dense_layer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include "kernels/bf16.hpp"
#include "runtime/dense_math.hpp"
#include "runtime/seed.hpp"
#include "runtime/wire.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpKind;
using schedule::Phase;

WeightLayout::WeightLayout(const Model& m)
    : hidden(m.hidden), q(int64_t(m.heads) * m.head_dim), kv(int64_t(m.kv_heads) * m.head_dim), inter(m.intermediate) {
  norm1 = 0;
  qkv = norm1 + hidden;
  o = qkv + hidden * qkv_width();
  norm2 = o + q * hidden;
  gu = norm2 + hidden;
  down = gu + hidden * 2 * inter;
  total = down + inter * hidden;
}

int64_t WeightLayout::fan_in(int64_t i) const {
  if (i < qkv || (i >= norm2 && i < gu)) return 0;
  if (i < o) return hidden;
  if (i < norm2) return q;
  if (i < down) return hidden;
  return inter;
}

namespace {

// Seeds of the dense values' own streams: input_value's hash on (seed ^ domain).
constexpr uint64_t kWeightDomain = 0x5745494748545321ull, kXDomain = 0x585f494e50555421ull,
                   kDyDomain = 0x44595f494e505554ull;

float get(std::span<const std::byte> buf, DType t, int64_t i) { return element_get(buf, t, i); }
void put(std::span<std::byte> buf, DType t, int64_t i, float v) { element_put(buf, t, i, v); }

}  // namespace

float element_get(std::span<const std::byte> buf, DType t, int64_t i) {
  if (t == DType::fp32) return reinterpret_cast<const float*>(buf.data())[i];
  return kernels::from_bf16(reinterpret_cast<const kernels::bf16_bits*>(buf.data())[i]);
}
void element_put(std::span<std::byte> buf, DType t, int64_t i, float v) {
  if (t == DType::fp32) reinterpret_cast<float*>(buf.data())[i] = v;
  else reinterpret_cast<kernels::bf16_bits*>(buf.data())[i] = kernels::to_bf16(v);
}

float weight_value(const WeightLayout& w, uint64_t seed, int layer, int64_t index) {
  const float u = input_value(seed ^ kWeightDomain, InputTensor::q, layer, index, 0, 0);
  const int64_t fan = w.fan_in(index);
  if (fan == 0) return kernels::round_bf16(1.f + u / 8.f);
  return kernels::round_bf16(u / std::sqrt(float(fan)));
}

float dense_input_value(uint64_t seed, DenseInput t, int64_t b, int64_t token, int64_t feature) {
  return input_value(seed ^ (t == DenseInput::x ? kXDomain : kDyDomain), InputTensor::q, b, token, feature, 0);
}

void rms_norm(std::span<const float> x, std::span<const float> w, std::span<float> y, int64_t width) {
  for (size_t r = 0; r * size_t(width) < x.size(); ++r) {
    const float* xr = x.data() + r * size_t(width);
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += double(xr[i]) * xr[i];
    const float inv = float(1.0 / std::sqrt(ss / double(width) + kRmsNormEps));
    for (int64_t i = 0; i < width; ++i) y[r * size_t(width) + size_t(i)] = xr[i] * inv * w[size_t(i)];
  }
}

void rms_norm_backward(std::span<const float> x, std::span<const float> w, std::span<const float> dy,
                       std::span<const float> residual, std::span<float> dx, int64_t width) {
  // With g = dy * w and r = 1/rms(x): dx = r g - x r^3 (g . x) / width.
  for (size_t r = 0; r * size_t(width) < x.size(); ++r) {
    const size_t at = r * size_t(width);
    double ss = 0, gx = 0;
    for (int64_t i = 0; i < width; ++i) {
      const double xi = x[at + size_t(i)];
      ss += xi * xi;
      gx += double(dy[at + size_t(i)]) * w[size_t(i)] * xi;
    }
    const double inv = 1.0 / std::sqrt(ss / double(width) + kRmsNormEps);
    const double c = inv * inv * inv * gx / double(width);
    for (int64_t i = 0; i < width; ++i) {
      const size_t j = at + size_t(i);
      const double v = inv * dy[j] * w[size_t(i)] - c * x[j];
      dx[j] = float(v + (residual.empty() ? 0.0 : double(residual[j])));
    }
  }
}

void swiglu(std::span<const float> gu, std::span<float> act, int64_t inter) {
  for (size_t r = 0; r * size_t(inter) < act.size(); ++r)
    for (size_t i = 0; i < size_t(inter); ++i) {
      const float g = gu[r * 2 * size_t(inter) + i], u = gu[r * 2 * size_t(inter) + size_t(inter) + i];
      act[r * size_t(inter) + i] = g / (1.f + std::exp(-g)) * u;
    }
}

void swiglu_backward(std::span<const float> gu, std::span<const float> dact, std::span<float> dgu, int64_t inter) {
  for (size_t r = 0; r * size_t(inter) < dact.size(); ++r)
    for (size_t i = 0; i < size_t(inter); ++i) {
      const size_t gi = r * 2 * size_t(inter) + i, ui = gi + size_t(inter);
      const float g = gu[gi], u = gu[ui], d = dact[r * size_t(inter) + i];
      const float sig = 1.f / (1.f + std::exp(-g));
      dgu[gi] = d * u * sig * (1.f + g * (1.f - sig));
      dgu[ui] = d * g * sig;
    }
}

// ---- packing -------------------------------------------------------------------------

using wire::append;
using wire::append_vec;

std::string pack(const DenseOutputs& d) {
  std::string s;
  append(s, int32_t(d.rank));
  append(s, int32_t(d.layer));
  append_vec(s, d.tokens);
  append_vec(s, d.y);
  append_vec(s, d.dx);
  append_vec(s, d.wgrad);
  return s;
}

DenseOutputs unpack_dense(std::string_view bytes) {
  wire::Reader r{bytes, "dense outputs"};
  DenseOutputs d;
  d.rank = r.take<int32_t>();
  d.layer = r.take<int32_t>();
  d.tokens = r.take_vec<int32_t>();
  d.y = r.take_vec<float>();
  d.dx = r.take_vec<float>();
  d.wgrad = r.take_vec<float>();
  return d;
}

// ---- the layer on the Schedule's buffers ------------------------------------------------

DenseLayer::Widths DenseLayer::widths(Kind k, const WeightLayout& w) {
  const int64_t H = w.hidden, I = w.inter;
  switch (k) {
    case Kind::norm1: case Kind::norm2: return {H, H, 0, 0};
    case Kind::swiglu: return {2 * I, I, 0, 0};
    case Kind::qkv: return {H, 0, 0, 0};
    case Kind::o_proj: return {0, H, 0, H};
    case Kind::gate_up: return {H, 2 * I, 0, 0};
    case Kind::down: return {I, H, 0, H};
    case Kind::down_bwd: return {I, I, H, 0};
    case Kind::swiglu_bwd: return {2 * I, 2 * I, I, 0};
    case Kind::gate_up_bwd: return {H, H, 2 * I, 0};
    case Kind::norm2_bwd: case Kind::norm1_bwd: return {H, H, H, H};
    case Kind::o_proj_bwd: return {0, 0, H, 0};
    case Kind::qkv_bwd: return {H, H, 0, 0};
    case Kind::none: break;
  }
  return {};
}

DenseLayer::DenseLayer(const schedule::Schedule& s, const Experiment& e, const Layouts& l, const BufferInstances& in,
                       int rank)
    : s_(s), l_(l), in_(in), rank_(rank), w_(e.model), batch_(e.workload.batch), head_dim_(e.model.head_dim) {
  kind_.assign(s.ops.size(), Kind::none);
  op_at_.assign(s.ops.size(), -1);
  if (e.parallel.tp != 1) return;
  auto name = [&](int b) -> const std::string& { return s.buffers[size_t(b)].name; };
  auto content = [&](int b, BufferRole c) { return l.of(b) && l.of(b)->content == c; };
  std::vector<bool> wgrad_seen(size_t(std::max(1, layer_count(s))), false);
  for (const auto& op : s.ops) {
    if (op.rank != rank || op.layer < 0 || (op.kind != OpKind::gemm && op.kind != OpKind::elementwise)) continue;
    const schedule::Access* a = s.access_of(op);
    if (!a) continue;
    auto in_list = [&](const std::vector<int>& ids, auto&& pred) {
      for (int b : ids)
        if (pred(b)) return b;
      return -1;
    };
    auto named = [&](const std::vector<int>& ids, const char* n) { return in_list(ids, [&](int b) { return name(b) == n; }); };
    auto x_of = [&](const std::vector<int>& ids) { return in_list(ids, [&](int b) { return is_layer_input(name(b)); }); };
    auto with = [&](const std::vector<int>& ids, BufferRole c) { return in_list(ids, [&](int b) { return content(b, c); }); };
    const auto& R = a->reads;
    const auto& W = a->writes;
    const bool gemm = op.kind == OpKind::gemm, bwd = op.phase == Phase::backward;
    Op o;
    o.id = op.id, o.layer = op.layer;
    o.weights = named(R, "weights");
    Kind k = Kind::none;
    if (!bwd) {
      if (!gemm && named(W, "xn1") >= 0) k = Kind::norm1, o.x = x_of(R), o.out = named(W, "xn1");
      else if (!gemm && named(W, "hn") >= 0) k = Kind::norm2, o.x = named(R, "h"), o.out = named(W, "hn");
      else if (!gemm && named(W, "act") >= 0) k = Kind::swiglu, o.x = named(R, "gu"), o.out = named(W, "act");
      else if (gemm && named(R, "xn1") >= 0)
        k = Kind::qkv, o.x = named(R, "xn1"), o.q = with(W, BufferRole::q), o.kv = with(W, BufferRole::kv);
      else if (gemm && named(W, "h") >= 0)
        k = Kind::o_proj, o.o = with(R, BufferRole::o), o.residual = x_of(R), o.out = named(W, "h");
      else if (gemm && named(W, "gu") >= 0) k = Kind::gate_up, o.x = named(R, "hn"), o.out = named(W, "gu");
      else if (gemm && named(R, "act") >= 0) k = Kind::down, o.x = named(R, "act"), o.residual = named(R, "h"), o.out = x_of(W);
    } else {
      if (gemm && named(R, "dx") >= 0 && named(R, "act") >= 0)
        k = Kind::down_bwd, o.dy = named(R, "dx"), o.x = named(R, "act"), o.out = named(W, "dact");
      else if (!gemm && named(W, "dgu") >= 0)
        k = Kind::swiglu_bwd, o.dy = named(R, "dact"), o.x = named(R, "gu"), o.out = named(W, "dgu");
      else if (gemm && named(R, "dgu") >= 0) k = Kind::gate_up_bwd, o.dy = named(R, "dgu"), o.x = named(R, "hn"), o.out = named(W, "dhn");
      else if (!gemm && named(W, "dh") >= 0)
        k = Kind::norm2_bwd, o.dy = named(R, "dhn"), o.x = named(R, "h"), o.residual = named(R, "dx"), o.out = named(W, "dh");
      else if (gemm && named(R, "dh") >= 0)
        k = Kind::o_proj_bwd, o.dy = named(R, "dh"), o.o = with(R, BufferRole::o), o.d_o = with(W, BufferRole::d_o);
      else if (gemm && named(R, "xn1") >= 0)
        k = Kind::qkv_bwd, o.x = named(R, "xn1"), o.dq = with(R, BufferRole::dq), o.dkv = with(R, BufferRole::dkv),
        o.out = named(W, "dxn1");
      else if (!gemm && named(W, "dx") >= 0)
        k = Kind::norm1_bwd, o.dy = named(R, "dxn1"), o.x = x_of(R), o.residual = named(R, "dh"), o.out = named(W, "dx");
      if (gemm && k != Kind::none) {
        o.wgrad = named(W, "wgrad");
        if (o.wgrad < 0) throw schedule::ScheduleError(schedule::describe(s, op.id) + ": a backward GEMM of the dense layer writes no wgrad");
        if (!wgrad_seen[size_t(op.layer)]) o.zero_wgrad = true, wgrad_seen[size_t(op.layer)] = true;
      }
    }
    if (k == Kind::none) continue;
    // Every buffer the op's semantics use (docs/runtime-check.md, "The layer scope").
    auto need = [&](std::initializer_list<std::pair<const char*, int>> fields) {
      for (auto [what, b] : fields)
        if (b < 0)
          throw schedule::ScheduleError(schedule::describe(s, op.id) + ": a dense-layer op without its " + what + " buffer");
    };
    switch (k) {
      case Kind::norm1: case Kind::norm2: need({{"input", o.x}, {"weights", o.weights}, {"output", o.out}}); break;
      case Kind::swiglu: case Kind::swiglu_bwd: need({{"gu", o.x}, {"output", o.out}}); break;
      case Kind::qkv: need({{"xn1", o.x}, {"weights", o.weights}, {"Q", o.q}, {"K|V", o.kv}}); break;
      case Kind::o_proj: need({{"O", o.o}, {"weights", o.weights}, {"residual x", o.residual}, {"h", o.out}}); break;
      case Kind::gate_up: need({{"hn", o.x}, {"weights", o.weights}, {"gu", o.out}}); break;
      case Kind::down: need({{"act", o.x}, {"weights", o.weights}, {"residual h", o.residual}, {"output x", o.out}}); break;
      case Kind::down_bwd: case Kind::gate_up_bwd:
        need({{"incoming gradient", o.dy}, {"input", o.x}, {"weights", o.weights}, {"output gradient", o.out}});
        break;
      case Kind::norm2_bwd: case Kind::norm1_bwd:
        need({{"incoming gradient", o.dy}, {"input", o.x}, {"weights", o.weights}, {"residual gradient", o.residual},
              {"output gradient", o.out}});
        break;
      case Kind::o_proj_bwd: need({{"dh", o.dy}, {"weights", o.weights}, {"O", o.o}, {"dO", o.d_o}}); break;
      case Kind::qkv_bwd: need({{"xn1", o.x}, {"weights", o.weights}, {"dQ", o.dq}, {"dK|dV", o.dkv}, {"dxn1", o.out}}); break;
      case Kind::none: break;
    }
    kind_[size_t(op.id)] = k;
    op_at_[size_t(op.id)] = int(ops_.size());
    ops_.push_back(o);
  }
  if (ops_.empty()) return;

  // The dense rows: the tokens of the first QKV GEMM's Q.
  for (const Op& o : ops_)
    if (kind_[size_t(o.id)] == Kind::qkv) {
      tokens_ = l.of(o.q)->tokens;
      break;
    }
  if (tokens_.empty())
    throw schedule::ScheduleError("rank " + std::to_string(rank) +
                                  ": the dense layer has no QKV GEMM writing the attention's Q, so its rows have no tokens");
  // Each attention buffer the dense ops touch: where each dense token and each head lies in it.
  const int64_t H = w_.q / head_dim_, KVH = w_.kv / head_dim_;
  maps_.resize(s.buffers.size());
  for (const Op& o : ops_)
    for (int b : {o.q, o.kv, o.o, o.d_o, o.dq, o.dkv}) {
      if (b < 0 || !maps_[size_t(b)].token.empty()) continue;
      const Layout& lay = *l.of(b);
      std::map<int32_t, int64_t> at;
      for (size_t i = 0; i < lay.tokens.size(); ++i) at[lay.tokens[i]] = int64_t(i);
      Map m;
      for (int32_t t : tokens_) {
        auto it = at.find(t);
        if (it == at.end() || lay.tokens.size() != tokens_.size())
          throw schedule::ScheduleError(schedule::describe(s, o.id) + ": buffer " + name(b) +
                                        " does not hold the dense rows' tokens (the stage-0 layouts of Q, K|V, O, dO, "
                                        "dQ and dK|dV must agree)");
        m.token.push_back(it->second);
      }
      const int64_t heads = lay.kv_like() ? KVH : H;
      m.head.assign(size_t(heads), -1);
      for (size_t i = 0; i < lay.heads.size(); ++i)
        if (lay.heads[i] >= 0 && lay.heads[i] < heads) m.head[size_t(lay.heads[i])] = int64_t(i);
      if (int64_t(lay.heads.size()) != heads || std::count(m.head.begin(), m.head.end(), -1))
        throw schedule::ScheduleError(schedule::describe(s, o.id) + ": buffer " + name(b) + " holds " +
                                      std::to_string(lay.heads.size()) + " of the " + std::to_string(heads) +
                                      " heads: the dense layer computes every head (tp = 1)");
      maps_[size_t(b)] = std::move(m);
    }
  const int64_t rows = batch_ * int64_t(tokens_.size());
  for (const Op& o : ops_) {
    if (o.weights >= 0 && s.buffers[size_t(o.weights)].elements() != w_.total)
      throw schedule::ScheduleError(schedule::describe(s, o.id) + ": buffer weights holds " +
                                    std::to_string(s.buffers[size_t(o.weights)].elements()) + " elements; the layer has " +
                                    std::to_string(w_.total) + " parameters (norm1, W_qkv, W_o, norm2, W_gu, W_down)");
    if (o.wgrad >= 0 && s.buffers[size_t(o.wgrad)].elements() != w_.total)
      throw schedule::ScheduleError(schedule::describe(s, o.id) + ": buffer wgrad holds " +
                                    std::to_string(s.buffers[size_t(o.wgrad)].elements()) + " elements; expected " +
                                    std::to_string(w_.total));
    // Dense buffers hold rows x their width exactly, in fp32 or bf16.
    const Widths wd = widths(kind_[size_t(o.id)], w_);
    for (auto [b, width] : {std::pair{o.x, wd.x}, {o.out, wd.out}, {o.dy, wd.dy}, {o.residual, wd.residual}}) {
      if (b < 0 || l.of(b)) continue;  // attention buffers are checked above
      const schedule::Buffer& buf = s.buffers[size_t(b)];
      if (buf.elements() != rows * width || (buf.dtype != DType::bf16 && buf.dtype != DType::fp32))
        throw schedule::ScheduleError(schedule::describe(s, o.id) + ": buffer " + name(b) + " holds " +
                                      std::to_string(buf.elements()) + " elements; expected " + std::to_string(rows) +
                                      " dense rows x " + std::to_string(width) + " features in bf16 or fp32");
    }
    const Kind k = kind_[size_t(o.id)];
    if (o.weights >= 0) weights_ = o.weights;
    if (k == Kind::norm1 && (x_in_.op < 0 || o.layer < s.ops[size_t(x_in_.op)].layer)) x_in_ = {o.x, o.id};
    if (k == Kind::down) y_out_ = {o.out, o.id};          // the last one in op order
    if (k == Kind::down_bwd && dy_in_.op < 0) dy_in_ = {o.dy, o.id};
    if (k == Kind::norm1_bwd) dx_out_ = {o.out, o.id};
    if (o.wgrad >= 0 && (wgrad_out_.op < 0 || o.layer >= s.ops[size_t(wgrad_out_.op)].layer)) wgrad_out_ = {o.wgrad, o.id};
  }
}


std::span<std::byte> DenseLayer::bytes(const Op& op, int b, TensorStore& store) const {
  return store.bytes(b, in_.copy(op.id, b));
}

std::vector<float> DenseLayer::load(const Op& op, int b, TensorStore& store) const {
  const auto buf = bytes(op, b, store);
  const DType t = s_.buffers[size_t(b)].dtype;
  std::vector<float> v(size_t(s_.buffers[size_t(b)].elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = get(buf, t, int64_t(i));
  return v;
}

void DenseLayer::store_to(const Op& op, int b, std::span<const float> v, TensorStore& store) const {
  auto buf = bytes(op, b, store);
  const DType t = s_.buffers[size_t(b)].dtype;
  const size_t n = std::min(v.size(), size_t(s_.buffers[size_t(b)].elements()));
  for (size_t i = 0; i < n; ++i) put(buf, t, int64_t(i), v[i]);
}

std::vector<float> DenseLayer::weights(const Op& op, int64_t at, int64_t n, TensorStore& store) const {
  const auto buf = bytes(op, op.weights, store);
  const DType t = s_.buffers[size_t(op.weights)].dtype;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = get(buf, t, at + i);
  return v;
}

void DenseLayer::add_wgrad(const Op& op, int64_t at, std::span<const float> dw, TensorStore& store) const {
  auto buf = bytes(op, op.wgrad, store);
  const DType t = s_.buffers[size_t(op.wgrad)].dtype;
  for (size_t i = 0; i < dw.size(); ++i) put(buf, t, at + int64_t(i), get(buf, t, at + int64_t(i)) + dw[i]);
}

int64_t DenseLayer::at_q(int b, int64_t r, int64_t c) const {
  const Map& m = maps_[size_t(b)];
  const int64_t T = int64_t(tokens_.size());
  const int64_t row = l_.of(b)->row(0, r / T, m.head[size_t(c / head_dim_)], m.token[size_t(r % T)], batch_);
  return row * head_dim_ + c % head_dim_;
}

int64_t DenseLayer::at_kv(int b, int part, int64_t r, int64_t c) const {
  const Map& m = maps_[size_t(b)];
  const int64_t T = int64_t(tokens_.size());
  const int64_t row = l_.of(b)->row(part, r / T, m.head[size_t(c / head_dim_)], m.token[size_t(r % T)], batch_);
  return row * head_dim_ + c % head_dim_;
}

void DenseLayer::run(schedule::OpId id, TensorStore& store) const {
  const Op& op = ops_.at(size_t(op_at_.at(size_t(id))));
  const int64_t H = w_.hidden, I = w_.inter;
  switch (kind_[size_t(id)]) {
    case Kind::norm1:
    case Kind::norm2: {
      const auto x = load(op, op.x, store), w = weights(op, kind_[size_t(id)] == Kind::norm1 ? w_.norm1 : w_.norm2, H, store);
      std::vector<float> y(x.size());
      rms_norm(x, w, y, H);
      store_to(op, op.out, y, store);
      break;
    }
    case Kind::swiglu: {
      const auto gu = load(op, op.x, store);
      std::vector<float> act(gu.size() / 2);
      swiglu(gu, act, I);
      store_to(op, op.out, act, store);
      break;
    }
    case Kind::qkv: qkv(op, store); break;
    case Kind::o_proj: o_proj(op, store); break;
    case Kind::gate_up: gemm_fwd(op, store, w_.gu, H, 2 * I); break;
    case Kind::down: gemm_fwd(op, store, w_.down, I, H); break;
    case Kind::down_bwd: gemm_bwd(op, store, w_.down, I, H); break;
    case Kind::gate_up_bwd: gemm_bwd(op, store, w_.gu, H, 2 * I); break;
    case Kind::swiglu_bwd: {
      const auto gu = load(op, op.x, store), dact = load(op, op.dy, store);
      std::vector<float> dgu(gu.size());
      swiglu_backward(gu, dact, dgu, I);
      store_to(op, op.out, dgu, store);
      break;
    }
    case Kind::norm2_bwd:
    case Kind::norm1_bwd: {
      const auto x = load(op, op.x, store), dy = load(op, op.dy, store), res = load(op, op.residual, store),
                 w = weights(op, kind_[size_t(id)] == Kind::norm1_bwd ? w_.norm1 : w_.norm2, H, store);
      std::vector<float> dx(x.size());
      rms_norm_backward(x, w, dy, res, dx, H);
      store_to(op, op.out, dx, store);
      break;
    }
    case Kind::o_proj_bwd: o_proj_bwd(op, store); break;
    case Kind::qkv_bwd: qkv_bwd(op, store); break;
    case Kind::none: break;
  }
}

// out = x W (+ residual); W is the [k x n] block of the weights at `w_at`.
void DenseLayer::gemm_fwd(const Op& op, TensorStore& store, int64_t w_at, int64_t k, int64_t n) const {
  const auto x = load(op, op.x, store), w = weights(op, w_at, k * n, store);
  const int64_t m = int64_t(x.size()) / k;
  std::vector<float> out = op.residual >= 0 ? load(op, op.residual, store) : std::vector<float>(size_t(m * n), 0.f);
  out.resize(size_t(m * n), 0.f);
  sgemm(false, false, m, n, k, x.data(), w.data(), 1.f, out.data());
  store_to(op, op.out, out, store);
}

// dX = dY W^T into `out`; dW = X^T dY added into wgrad at `w_at`.
void DenseLayer::gemm_bwd(const Op& op, TensorStore& store, int64_t w_at, int64_t k, int64_t n) const {
  const auto dy = load(op, op.dy, store), x = load(op, op.x, store), w = weights(op, w_at, k * n, store);
  const int64_t m = int64_t(dy.size()) / n;
  std::vector<float> dx(size_t(m * k)), dw(size_t(k * n));
  sgemm(false, true, m, k, n, dy.data(), w.data(), 0.f, dx.data());
  sgemm(true, false, k, n, m, x.data(), dy.data(), 0.f, dw.data());
  store_to(op, op.out, dx, store);
  if (op.zero_wgrad) {
    auto g = bytes(op, op.wgrad, store);
    std::fill(g.begin(), g.end(), std::byte{0});
  }
  add_wgrad(op, w_at, dw, store);
}

void DenseLayer::qkv(const Op& op, TensorStore& store) const {
  const int64_t K = w_.hidden, N = w_.qkv_width();
  const auto x = load(op, op.x, store), w = weights(op, w_.qkv, K * N, store);
  const int64_t m = int64_t(x.size()) / K;
  std::vector<float> y(size_t(m * N));
  sgemm(false, false, m, N, K, x.data(), w.data(), 0.f, y.data());
  auto q = bytes(op, op.q, store), kv = bytes(op, op.kv, store);
  const DType qt = s_.buffers[size_t(op.q)].dtype, kvt = s_.buffers[size_t(op.kv)].dtype;
  for (int64_t r = 0; r < m; ++r) {
    const float* yr = y.data() + r * N;
    for (int64_t c = 0; c < w_.q; ++c) put(q, qt, at_q(op.q, r, c), yr[c]);
    for (int part = 0; part < 2; ++part)
      for (int64_t c = 0; c < w_.kv; ++c) put(kv, kvt, at_kv(op.kv, part, r, c), yr[w_.q + part * w_.kv + c]);
  }
}

void DenseLayer::o_proj(const Op& op, TensorStore& store) const {
  const auto w = weights(op, w_.o, w_.q * w_.hidden, store);
  std::vector<float> h = load(op, op.residual, store);
  const int64_t m = int64_t(h.size()) / w_.hidden;
  const auto ob = bytes(op, op.o, store);
  const DType ot = s_.buffers[size_t(op.o)].dtype;
  std::vector<float> o(size_t(m * w_.q));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < w_.q; ++c) o[size_t(r * w_.q + c)] = get(ob, ot, at_q(op.o, r, c));
  sgemm(false, false, m, w_.hidden, w_.q, o.data(), w.data(), 1.f, h.data());
  store_to(op, op.out, h, store);
}

void DenseLayer::o_proj_bwd(const Op& op, TensorStore& store) const {
  const auto dh = load(op, op.dy, store), w = weights(op, w_.o, w_.q * w_.hidden, store);
  const int64_t m = int64_t(dh.size()) / w_.hidden, q = w_.q;
  const auto ob = bytes(op, op.o, store);
  const DType ot = s_.buffers[size_t(op.o)].dtype, dt = s_.buffers[size_t(op.d_o)].dtype;
  std::vector<float> o(size_t(m * q)), d_o(size_t(m * q)), dw(size_t(q * w_.hidden));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < q; ++c) o[size_t(r * q + c)] = get(ob, ot, at_q(op.o, r, c));
  sgemm(false, true, m, q, w_.hidden, dh.data(), w.data(), 0.f, d_o.data());
  sgemm(true, false, q, w_.hidden, m, o.data(), dh.data(), 0.f, dw.data());
  auto db = bytes(op, op.d_o, store);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < q; ++c) put(db, dt, at_q(op.d_o, r, c), d_o[size_t(r * q + c)]);
  if (op.zero_wgrad) {
    auto g = bytes(op, op.wgrad, store);
    std::fill(g.begin(), g.end(), std::byte{0});
  }
  add_wgrad(op, w_.o, dw, store);
}

void DenseLayer::qkv_bwd(const Op& op, TensorStore& store) const {
  const int64_t K = w_.hidden, N = w_.qkv_width();
  const auto x = load(op, op.x, store), w = weights(op, w_.qkv, K * N, store);
  const int64_t m = int64_t(x.size()) / K;
  const auto dq = bytes(op, op.dq, store), dkv = bytes(op, op.dkv, store);
  const DType qt = s_.buffers[size_t(op.dq)].dtype, kvt = s_.buffers[size_t(op.dkv)].dtype;
  std::vector<float> dy(size_t(m * N)), dx(size_t(m * K)), dw(size_t(K * N));
  for (int64_t r = 0; r < m; ++r) {
    float* yr = dy.data() + r * N;
    for (int64_t c = 0; c < w_.q; ++c) yr[c] = get(dq, qt, at_q(op.dq, r, c));
    for (int part = 0; part < 2; ++part)
      for (int64_t c = 0; c < w_.kv; ++c) yr[w_.q + part * w_.kv + c] = get(dkv, kvt, at_kv(op.dkv, part, r, c));
  }
  sgemm(false, true, m, K, N, dy.data(), w.data(), 0.f, dx.data());
  sgemm(true, false, K, N, m, x.data(), dy.data(), 0.f, dw.data());
  store_to(op, op.out, dx, store);
  if (op.zero_wgrad) {
    auto g = bytes(op, op.wgrad, store);
    std::fill(g.begin(), g.end(), std::byte{0});
  }
  add_wgrad(op, w_.qkv, dw, store);
}

namespace {
// First access of a buffer in op id order on `rank` is a read.
bool first_read(const schedule::Schedule& s, int rank, int buffer) {
  for (const auto& op : s.ops) {
    if (op.rank != rank) continue;
    const schedule::Access* a = s.access_of(op);
    if (!a) continue;
    if (std::count(a->reads.begin(), a->reads.end(), buffer)) return true;
    if (std::count(a->writes.begin(), a->writes.end(), buffer)) return false;
  }
  return false;
}
}  // namespace

void DenseLayer::seed(TensorStore& store, uint64_t seed) const {
  if (!active()) return;
  if (weights_ >= 0) {
    const DType t = s_.buffers[size_t(weights_)].dtype;
    auto all = store.bytes(weights_, -1);
    const int64_t one = s_.buffers[size_t(weights_)].bytes();
    for (int64_t c = 0; c * one < int64_t(all.size()); ++c) {  // copy c is layer c's
      auto d = all.subspan(size_t(c * one), size_t(one));
      for (int64_t i = 0; i < w_.total; ++i) put(d, t, i, weight_value(w_, seed, int(c), i));
    }
  }
  seed_rows(x_in_, DenseInput::x, store, seed);
  seed_rows(dy_in_, DenseInput::dy, store, seed);
}

void DenseLayer::reseed_gradient(TensorStore& store, uint64_t seed) const {
  if (active()) seed_rows(dy_in_, DenseInput::dy, store, seed);
}

// Every copy of the buffer, when its first access is a read.
void DenseLayer::seed_rows(Use u, DenseInput what, TensorStore& store, uint64_t seed) const {
  if (u.buffer < 0 || !first_read(s_, rank_, u.buffer)) return;
  const DType t = s_.buffers[size_t(u.buffer)].dtype;
  const int64_t T = int64_t(tokens_.size()), n = batch_ * T * w_.hidden;
  auto all = store.bytes(u.buffer, -1);
  const int64_t one = s_.buffers[size_t(u.buffer)].elements();
  for (int64_t c = 0; c * one < int64_t(all.size()) / schedule::dtype_bytes(t); ++c)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = i / w_.hidden;
      put(all, t, c * one + i, dense_input_value(seed, what, r / T, tokens_[size_t(r % T)], i % w_.hidden));
    }
}

DenseOutputs DenseLayer::read_outputs(TensorStore& store) const {
  DenseOutputs d;
  d.rank = rank_;
  d.tokens = tokens_;
  auto read = [&](Use u) {
    if (u.buffer < 0) return std::vector<float>{};
    const Op& op = ops_.at(size_t(op_at_.at(size_t(u.op))));
    return load(op, u.buffer, store);
  };
  d.y = read(y_out_);
  d.dx = read(dx_out_);
  d.wgrad = read(wgrad_out_);
  if (y_out_.op >= 0) d.layer = s_.ops[size_t(y_out_.op)].layer;
  return d;
}

}  // namespace rm::runtime
