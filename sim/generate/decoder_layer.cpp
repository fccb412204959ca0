#include "sim/generate/decoder_layer.hpp"

#include "sim/generate/attention.hpp"
#include "sim/generate/layer_costs.hpp"

namespace rm::generate {

using schedule::OpKind;
using schedule::Phase;
using schedule::Where;

namespace {

struct Gemm {
  int64_t n, k;  // output features, input features (m = local tokens)
};

// Every rank runs the same dense op on its own tokens.
void on_every_rank(StepContext& ctx, OpKind kind, Where where, double flops, RankDeps& ready) {
  const int64_t tokens = ctx.local_tokens();
  for (int r = 0; r < ctx.e.parallel.world(); ++r) ctx.compute(r, kind, where, {flops, 0, tokens}, ready);
}

void gemm(StepContext& ctx, Where where, Gemm g, bool backward, RankDeps& ready) {
  const double f = gemm_flops(ctx.local_tokens(), g.n, g.k) * (backward ? kGemmBwdFlopsRatio : 1.0);
  on_every_rank(ctx, OpKind::gemm, where, f, ready);
}

void elementwise(StepContext& ctx, Where where, int64_t width, double per_element, RankDeps& ready) {
  on_every_rank(ctx, OpKind::elementwise, where, double(ctx.local_tokens()) * double(width) * per_element, ready);
}

}  // namespace

void emit_layer_forward(StepContext& ctx, const LayerForward& f, RankDeps& ready) {
  const Model& m = ctx.e.model;
  const Where w{f.phase, f.layer, -1};
  const int64_t q = int64_t(m.heads) * m.head_dim, kv = int64_t(m.kv_heads) * m.head_dim;
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready);
  gemm(ctx, w, {q + 2 * kv, m.hidden}, false, ready);
  if (f.with_attention) emit_attention(ctx, {f.phase, f.layer, false, false}, ready);
  gemm(ctx, w, {m.hidden, q}, false, ready);
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready);
  gemm(ctx, w, {2 * m.intermediate, m.hidden}, false, ready);
  elementwise(ctx, w, m.intermediate, kSwigluFlopsPerElement, ready);
  gemm(ctx, w, {m.hidden, m.intermediate}, false, ready);
}

void emit_layer_backward(StepContext& ctx, int layer, bool qkv_recomputed, RankDeps& ready) {
  const Model& m = ctx.e.model;
  const Where w{Phase::backward, layer, -1};
  const int64_t q = int64_t(m.heads) * m.head_dim, kv = int64_t(m.kv_heads) * m.head_dim;
  gemm(ctx, w, {m.hidden, m.intermediate}, true, ready);
  elementwise(ctx, w, m.intermediate, kSwigluFlopsPerElement, ready);
  gemm(ctx, w, {2 * m.intermediate, m.hidden}, true, ready);
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready);
  gemm(ctx, w, {m.hidden, q}, true, ready);
  emit_attention(ctx, {Phase::backward, layer, true, qkv_recomputed}, ready);
  gemm(ctx, w, {q + 2 * kv, m.hidden}, true, ready);
  elementwise(ctx, w, m.hidden, kNormFlopsPerElement, ready);
}

}  // namespace rm::generate
