#include "sim/generate/decoder_layer.hpp"

#include <functional>
#include <utility>

#include <fmt/format.h>

#include "sim/generate/attention.hpp"
#include "sim/generate/layer_costs.hpp"

namespace rm::generate {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpKind;
using schedule::Phase;
using schedule::Where;

namespace {

struct Gemm {
  int64_t n, k;  // output features, input features (m = local tokens)
};

using Io = std::function<std::pair<std::vector<int>, std::vector<int>>(int rank)>;  // reads, writes

// Every rank runs the same dense op on its own tokens.
std::vector<OpId> on_every_rank(StepContext& ctx, OpKind kind, Where where, double flops, RankDeps& ready,
                                const Io& io) {
  const int64_t tokens = ctx.local_tokens();
  std::vector<OpId> ids;
  for (int r = 0; r < ctx.e.parallel.world(); ++r) {
    ids.push_back(ctx.compute(r, kind, where, {flops, 0, tokens}, ready));
    auto [reads, writes] = io(r);
    ctx.access(ids.back(), std::move(reads), std::move(writes));
  }
  return ids;
}

// A backward GEMM carries its forward's (m, n, k) and computes dX and dW from it.
void gemm(StepContext& ctx, Where where, Gemm g, bool backward, RankDeps& ready, const Io& io) {
  const double f = gemm_flops(ctx.local_tokens(), g.n, g.k) * (backward ? kGemmBwdFlopsRatio : 1.0);
  for (OpId id : on_every_rank(ctx, OpKind::gemm, where, f, ready, io)) ctx.b.set_gemm(id, {ctx.local_tokens(), g.n, g.k});
}

void elementwise(StepContext& ctx, Where where, int64_t width, double per_element, RankDeps& ready, const Io& io) {
  on_every_rank(ctx, OpKind::elementwise, where, double(ctx.local_tokens()) * double(width) * per_element, ready, io);
}

std::vector<int> cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

int layer_input(StepContext& ctx, int rank, int layer) {
  std::vector<int>& memo = ctx.memo.layer_input[size_t(rank)];
  if (size_t(layer) < memo.size() && memo[size_t(layer)] >= 0) return memo[size_t(layer)];
  const int id = ctx.buffer(rank, fmt::format("x{}", layer), BufferRole::activation, DType::bf16,
                            {ctx.local_tokens(), ctx.e.model.hidden});
  if (memo.size() <= size_t(layer)) memo.resize(size_t(layer) + 1, -1);
  memo[size_t(layer)] = id;
  return id;
}

LayerBuffers layer_buffers(StepContext& ctx, int r) {
  auto& memo = ctx.memo.layer[size_t(r)];
  if (memo) return *memo;
  const Model& m = ctx.e.model;
  const int64_t T = ctx.local_tokens();
  auto act = [&](const char* name, int64_t width, schedule::Instances instances) {
    return ctx.buffer(r, name, BufferRole::activation, DType::bf16, {T, width}, instances);
  };
  constexpr auto kOne = schedule::Instances::one;
  LayerBuffers b;
  b.xn1 = act("xn1", m.hidden, kPerLayer);
  b.h = act("h", m.hidden, kPerLayer);
  b.hn = act("hn", m.hidden, kPerLayer);
  b.gu = act("gu", 2 * m.intermediate, kPerLayer);
  b.act = act("act", m.intermediate, kPerLayer);
  b.weights = ctx.buffer(r, "weights", BufferRole::weight, DType::bf16, {m.layer_params()}, kPerLayer);
  if (ctx.has_backward()) {
    b.dx = act("dx", m.hidden, kOne);
    b.dact = act("dact", m.intermediate, kOne);
    b.dgu = act("dgu", 2 * m.intermediate, kOne);
    b.dhn = act("dhn", m.hidden, kOne);
    b.dh = act("dh", m.hidden, kOne);
    b.dxn1 = act("dxn1", m.hidden, kOne);
    b.wgrad = ctx.buffer(r, "wgrad", BufferRole::gradient, DType::bf16, {m.layer_params()}, kPerLayer);
  }
  memo = b;
  return b;
}

void emit_layer_forward(StepContext& ctx, const LayerForward& f, RankDeps& ready) {
  const Model& m = ctx.e.model;
  const Where w{f.phase, f.layer, -1};
  const int64_t q = int64_t(m.heads) * m.head_dim, kv = int64_t(m.kv_heads) * m.head_dim;
  const int L = f.layer;
  auto io = [&](auto fn) -> Io {
    return [&ctx, L, fn](int r) {
      const LayerBuffers b = layer_buffers(ctx, r);
      return fn(r, b);
    };
  };
  using RW = std::pair<std::vector<int>, std::vector<int>>;
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready,
              io([&](int r, const LayerBuffers& b) { return RW{{layer_input(ctx, r, L), b.weights}, {b.xn1}}; }));
  gemm(ctx, w, {q + 2 * kv, m.hidden}, false, ready, io([&](int r, const LayerBuffers& b) {
         return RW{{b.xn1, b.weights}, attention_inputs(ctx, r, f.phase, false)};
       }));
  if (f.with_attention) emit_attention(ctx, {f.phase, f.layer, false, false}, ready);
  gemm(ctx, w, {m.hidden, q}, false, ready, io([&](int r, const LayerBuffers& b) {
         return RW{cat(attention_outputs(ctx, r, f.phase, false), {b.weights, layer_input(ctx, r, L)}), {b.h}};
       }));
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.h, b.weights}, {b.hn}}; }));
  gemm(ctx, w, {2 * m.intermediate, m.hidden}, false, ready,
       io([&](int, const LayerBuffers& b) { return RW{{b.hn, b.weights}, {b.gu}}; }));
  elementwise(ctx, w, m.intermediate, kSwigluFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.gu}, {b.act}}; }));
  gemm(ctx, w, {m.hidden, m.intermediate}, false, ready, io([&](int r, const LayerBuffers& b) {
         return RW{{b.act, b.weights, b.h}, {layer_input(ctx, r, L + 1)}};
       }));
}

void emit_layer_backward(StepContext& ctx, int layer, bool qkv_recomputed, RankDeps& ready) {
  const Model& m = ctx.e.model;
  const Where w{Phase::backward, layer, -1};
  const int64_t q = int64_t(m.heads) * m.head_dim, kv = int64_t(m.kv_heads) * m.head_dim;
  using RW = std::pair<std::vector<int>, std::vector<int>>;
  auto io = [&](auto fn) -> Io {
    return [&ctx, fn](int r) { return fn(r, layer_buffers(ctx, r)); };
  };
  gemm(ctx, w, {m.hidden, m.intermediate}, true, ready,
       io([&](int, const LayerBuffers& b) { return RW{{b.dx, b.act, b.weights}, {b.dact, b.wgrad}}; }));
  elementwise(ctx, w, m.intermediate, kSwigluFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.dact, b.gu}, {b.dgu}}; }));
  gemm(ctx, w, {2 * m.intermediate, m.hidden}, true, ready,
       io([&](int, const LayerBuffers& b) { return RW{{b.dgu, b.hn, b.weights}, {b.dhn, b.wgrad}}; }));
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.dhn, b.h, b.weights, b.dx}, {b.dh}}; }));
  gemm(ctx, w, {m.hidden, q}, true, ready, io([&](int r, const LayerBuffers& b) {
         return RW{cat({b.dh, b.weights}, attention_outputs(ctx, r, Phase::backward, false)),
                   cat({b.wgrad}, {attention_inputs(ctx, r, Phase::backward, true)})};
       }));
  emit_attention(ctx, {Phase::backward, layer, true, qkv_recomputed}, ready);
  gemm(ctx, w, {q + 2 * kv, m.hidden}, true, ready, io([&](int r, const LayerBuffers& b) {
         return RW{cat({b.xn1, b.weights}, attention_outputs(ctx, r, Phase::backward, true)), {b.dxn1, b.wgrad}};
       }));
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready, io([&](int r, const LayerBuffers& b) {
                return RW{{b.dxn1, layer_input(ctx, r, layer), b.weights, b.dh}, {b.dx}};
              }));
}

}  // namespace rm::generate
