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
  int64_t n, k;  // output features, input features of the rank's shard (m = local tokens)
};

using Io = std::function<std::pair<std::vector<int>, std::vector<int>>(int rank)>;  // reads, writes

// Every rank runs the same dense op on its own `tokens`.
std::vector<OpId> on_every_rank(StepContext& ctx, OpKind kind, Where where, double flops, int64_t tokens,
                                RankDeps& ready, const Io& io) {
  std::vector<OpId> ids;
  for (int r = 0; r < ctx.sim_world; ++r) {
    ids.push_back(ctx.compute(r, kind, where, {flops, 0, tokens}, ready));
    auto [reads, writes] = io(r);
    ctx.access(ids.back(), std::move(reads), std::move(writes));
  }
  return ids;
}

// A backward GEMM carries its forward's (m, n, k) and computes dX and dW from it.
// Every GEMM sees all local tokens (with tp > 1 the all-gathered ones).
void gemm(StepContext& ctx, Where where, Gemm g, bool backward, RankDeps& ready, const Io& io) {
  const int64_t m = ctx.local_tokens();
  const double f = gemm_flops(m, g.n, g.k) * (backward ? kGemmBwdFlopsRatio : 1.0);
  for (OpId id : on_every_rank(ctx, OpKind::gemm, where, f, m, ready, io)) ctx.b.set_gemm(id, {m, g.n, g.k});
}

// `tokens` x `width` elements: the norms on the sequence-parallel tokens, SwiGLU on all local
// tokens and the rank's 1/tp of the intermediate features.
void elementwise(StepContext& ctx, Where where, int64_t tokens, int64_t width, double per_element, RankDeps& ready,
                 const Io& io) {
  on_every_rank(ctx, OpKind::elementwise, where, double(tokens) * double(width) * per_element, tokens, ready, io);
}

std::vector<int> cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

void tensor_collective(StepContext& ctx, OpKind kind, Where where, int64_t bytes, RankDeps& ready, const Io& io) {
  for (int g : ctx.tensor_groups) {
    auto ids = ctx.collective(g, kind, bytes, where, &RankStreams::tp, ready, 0);
    const auto members = ctx.b.peek().groups[size_t(g)].ranks;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto [reads, writes] = io(members[i]);
      ctx.access(ids[i], std::move(reads), std::move(writes));
    }
  }
}

int64_t tensor_collective_bytes(const StepContext& ctx) { return ctx.local_tokens() * ctx.e.model.hidden * kBf16Bytes; }

int layer_input(StepContext& ctx, int rank, int layer) {
  std::vector<int>& memo = ctx.memo.layer_input[size_t(rank)];
  if (size_t(layer) < memo.size() && memo[size_t(layer)] >= 0) return memo[size_t(layer)];
  const int id = ctx.buffer(rank, fmt::format("x{}", layer), BufferRole::activation, DType::bf16,
                            {ctx.sp_tokens(), ctx.e.model.hidden});
  if (memo.size() <= size_t(layer)) memo.resize(size_t(layer) + 1, -1);
  memo[size_t(layer)] = id;
  return id;
}

LayerBuffers layer_buffers(StepContext& ctx, int r) {
  auto& memo = ctx.memo.layer[size_t(r)];
  if (memo) return *memo;
  const Model& m = ctx.e.model;
  const int tp = ctx.e.parallel.tp;
  const int64_t T = ctx.local_tokens(), Ts = ctx.sp_tokens(), I = m.intermediate / tp;
  auto act = [&](const char* name, int64_t tokens, int64_t width, schedule::Instances instances) {
    return ctx.buffer(r, name, BufferRole::activation, DType::bf16, {tokens, width}, instances);
  };
  constexpr auto kOne = schedule::Instances::one;
  LayerBuffers b;
  b.xn1 = act("xn1", Ts, m.hidden, kPerLayer);
  b.h = act("h", Ts, m.hidden, kPerLayer);
  b.hn = act("hn", Ts, m.hidden, kPerLayer);
  b.gu = act("gu", T, 2 * I, kPerLayer);
  b.act = act("act", T, I, kPerLayer);
  b.weights = ctx.buffer(r, "weights", BufferRole::weight, DType::bf16, {tp_layer_params(m, tp)}, kPerLayer);
  if (ctx.has_backward()) {
    b.dx = act("dx", Ts, m.hidden, kOne);
    b.dact = act("dact", T, I, kOne);
    b.dgu = act("dgu", T, 2 * I, kOne);
    b.dhn = act("dhn", Ts, m.hidden, kOne);
    b.dh = act("dh", Ts, m.hidden, kOne);
    b.dxn1 = act("dxn1", Ts, m.hidden, kOne);
    b.wgrad = ctx.buffer(r, "wgrad", BufferRole::gradient, DType::bf16, {tp_layer_params(m, tp)}, kPerLayer);
  }
  // Declared after the rest, and only with tp > 1: tp = 1 keeps its buffer ids.
  b.xn1_full = b.xn1, b.hn_full = b.hn, b.h_part = b.h, b.out_part = -1;
  b.dx_full = b.dx, b.dh_full = b.dh, b.dhn_part = b.dhn, b.dxn1_part = b.dxn1;
  if (ctx.tensor_parallel()) {
    b.xn1_full = act("xn1.full", T, m.hidden, kOne);  // the backward gathers it again
    b.hn_full = act("hn.full", T, m.hidden, kOne);
    b.h_part = act("h.part", T, m.hidden, kOne);
    b.out_part = act("out.part", T, m.hidden, kOne);
    if (ctx.has_backward()) {
      b.dx_full = act("dx.full", T, m.hidden, kOne);
      b.dh_full = act("dh.full", T, m.hidden, kOne);
      b.dhn_part = act("dhn.part", T, m.hidden, kOne);
      b.dxn1_part = act("dxn1.part", T, m.hidden, kOne);
    }
  }
  memo = b;
  return b;
}

namespace {
using RW = std::pair<std::vector<int>, std::vector<int>>;
// With tp > 1: the tensor group's all-gather of `from` into `to` (or reduce-scatter).
void tp_exchange(StepContext& ctx, OpKind kind, Where w, RankDeps& ready, int LayerBuffers::*from,
                 int LayerBuffers::*to) {
  if (!ctx.tensor_parallel()) return;
  tensor_collective(ctx, kind, w, tensor_collective_bytes(ctx), ready, [&](int r) {
    const LayerBuffers b = layer_buffers(ctx, r);
    return RW{{b.*from}, {b.*to}};
  });
}
}  // namespace

void emit_layer_forward(StepContext& ctx, const LayerForward& f, RankDeps& ready) {
  const Model& m = ctx.e.model;
  const Where w{f.phase, f.layer, -1};
  const int tp = ctx.e.parallel.tp;
  const int64_t q = int64_t(m.heads) * m.head_dim / tp, kv = int64_t(m.kv_heads) * m.head_dim / tp;
  const int64_t I = m.intermediate / tp, T = ctx.local_tokens(), Ts = ctx.sp_tokens();
  const bool split = ctx.tensor_parallel();
  const int L = f.layer;
  auto io = [&](auto fn) -> Io {
    return [&ctx, L, fn](int r) {
      const LayerBuffers b = layer_buffers(ctx, r);
      return fn(r, b);
    };
  };
  elementwise(ctx, w, Ts, m.hidden, kNormFlopsPerElement, ready,
              io([&](int r, const LayerBuffers& b) { return RW{{layer_input(ctx, r, L), b.weights}, {b.xn1}}; }));
  tp_exchange(ctx, OpKind::all_gather, w, ready, &LayerBuffers::xn1, &LayerBuffers::xn1_full);
  gemm(ctx, w, {q + 2 * kv, m.hidden}, false, ready, io([&](int r, const LayerBuffers& b) {
         return RW{{b.xn1_full, b.weights}, attention_inputs(ctx, r, f.phase, false)};
       }));
  if (f.with_attention) emit_attention(ctx, {f.phase, f.layer, false, false}, ready);
  // The residual add is fused into the GEMM epilogue; with tp > 1 each tensor rank adds its
  // sequence-parallel slice of the residual into its partial sum's rows of that slice, so
  // the reduce-scatter hands every rank its tokens' sum plus their residual.
  gemm(ctx, w, {m.hidden, q}, false, ready, io([&](int r, const LayerBuffers& b) {
         return RW{cat(attention_outputs(ctx, r, f.phase, false), {b.weights, layer_input(ctx, r, L)}), {b.h_part}};
       }));
  tp_exchange(ctx, OpKind::reduce_scatter, w, ready, &LayerBuffers::h_part, &LayerBuffers::h);
  elementwise(ctx, w, Ts, m.hidden, kNormFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.h, b.weights}, {b.hn}}; }));
  tp_exchange(ctx, OpKind::all_gather, w, ready, &LayerBuffers::hn, &LayerBuffers::hn_full);
  gemm(ctx, w, {2 * I, m.hidden}, false, ready,
       io([&](int, const LayerBuffers& b) { return RW{{b.hn_full, b.weights}, {b.gu}}; }));
  elementwise(ctx, w, T, I, kSwigluFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.gu}, {b.act}}; }));
  gemm(ctx, w, {m.hidden, I}, false, ready, io([&](int r, const LayerBuffers& b) {
         return RW{{b.act, b.weights, b.h}, {split ? b.out_part : layer_input(ctx, r, L + 1)}};
       }));
  if (split)
    tensor_collective(ctx, OpKind::reduce_scatter, w, tensor_collective_bytes(ctx), ready, [&](int r) {
      return RW{{layer_buffers(ctx, r).out_part}, {layer_input(ctx, r, L + 1)}};
    });
}

void emit_layer_backward(StepContext& ctx, int layer, bool qkv_recomputed, RankDeps& ready) {
  const Model& m = ctx.e.model;
  const Where w{Phase::backward, layer, -1};
  const int tp = ctx.e.parallel.tp;
  const int64_t q = int64_t(m.heads) * m.head_dim / tp, kv = int64_t(m.kv_heads) * m.head_dim / tp;
  const int64_t I = m.intermediate / tp, T = ctx.local_tokens(), Ts = ctx.sp_tokens();
  auto io = [&](auto fn) -> Io {
    return [&ctx, fn](int r) { return fn(r, layer_buffers(ctx, r)); };
  };
  // Megatron-SP keeps only the rank's T/tp rows of a column-parallel GEMM's input (xn1,
  // hn) and all-gathers them again for the weight gradient: issued on the tp stream right
  // after the all-gather the compute stream needs first, so it overlaps that compute.
  auto regather = [&](int LayerBuffers::*from, int LayerBuffers::*to) {
    RankDeps after = ready;
    tp_exchange(ctx, OpKind::all_gather, w, after, from, to);
    return after;
  };
  auto join = [&](const RankDeps& also) {
    if (!ctx.tensor_parallel()) return;
    for (size_t r = 0; r < ready.size(); ++r) ready[r].insert(ready[r].end(), also[r].begin(), also[r].end());
  };
  tp_exchange(ctx, OpKind::all_gather, w, ready, &LayerBuffers::dx, &LayerBuffers::dx_full);
  const RankDeps hn_gathered = regather(&LayerBuffers::hn, &LayerBuffers::hn_full);
  gemm(ctx, w, {m.hidden, I}, true, ready,
       io([&](int, const LayerBuffers& b) { return RW{{b.dx_full, b.act, b.weights}, {b.dact, b.wgrad}}; }));
  elementwise(ctx, w, T, I, kSwigluFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.dact, b.gu}, {b.dgu}}; }));
  join(hn_gathered);
  gemm(ctx, w, {2 * I, m.hidden}, true, ready,
       io([&](int, const LayerBuffers& b) { return RW{{b.dgu, b.hn_full, b.weights}, {b.dhn_part, b.wgrad}}; }));
  tp_exchange(ctx, OpKind::reduce_scatter, w, ready, &LayerBuffers::dhn_part, &LayerBuffers::dhn);
  elementwise(ctx, w, Ts, m.hidden, kNormFlopsPerElement, ready,
              io([&](int, const LayerBuffers& b) { return RW{{b.dhn, b.h, b.weights, b.dx}, {b.dh}}; }));
  tp_exchange(ctx, OpKind::all_gather, w, ready, &LayerBuffers::dh, &LayerBuffers::dh_full);
  const RankDeps xn1_gathered = regather(&LayerBuffers::xn1, &LayerBuffers::xn1_full);
  gemm(ctx, w, {m.hidden, q}, true, ready, io([&](int r, const LayerBuffers& b) {
         return RW{cat({b.dh_full, b.weights}, attention_outputs(ctx, r, Phase::backward, false)),
                   cat({b.wgrad}, {attention_inputs(ctx, r, Phase::backward, true)})};
       }));
  emit_attention(ctx, {Phase::backward, layer, true, qkv_recomputed}, ready);
  join(xn1_gathered);
  gemm(ctx, w, {q + 2 * kv, m.hidden}, true, ready, io([&](int r, const LayerBuffers& b) {
         return RW{cat({b.xn1_full, b.weights}, attention_outputs(ctx, r, Phase::backward, true)), {b.dxn1_part, b.wgrad}};
       }));
  tp_exchange(ctx, OpKind::reduce_scatter, w, ready, &LayerBuffers::dxn1_part, &LayerBuffers::dxn1);
  elementwise(ctx, w, Ts, m.hidden, kNormFlopsPerElement, ready, io([&](int r, const LayerBuffers& b) {
                return RW{{b.dxn1, layer_input(ctx, r, layer), b.weights, b.dh}, {b.dx}};
              }));
}

}  // namespace rm::generate
