#include "sim/generate/generate.hpp"

#include <string>
#include <utility>

#include "sim/generate/attention.hpp"
#include "sim/generate/decoder_layer.hpp"
#include "sim/generate/layer_costs.hpp"

namespace rm::generate {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpKind;
using schedule::Phase;
using schedule::Where;

namespace {

// The parameters of a decoder layer (layer >= 0) or of the embedding, LM head and
// final norm (layer -1) on a rank (buffer_ids.hpp).
using Params = ParamBuffers;
Params params_of(StepContext& ctx, int r, int layer) {
  const bool of_layer = layer >= 0;
  auto& memo = ctx.memo.params[size_t(r)][of_layer ? 1 : 0];
  if (memo) return *memo;
  const Model& m = ctx.e.model;
  const auto per_layer = of_layer ? kPerLayer : schedule::Instances::one;
  const int64_t n = of_layer ? m.layer_params() : m.vocab * m.hidden * (m.tied_embeddings ? 1 : 2) + m.hidden;
  const int64_t shard = (n + ctx.e.parallel.world() - 1) / ctx.e.parallel.world();
  const std::string base = of_layer ? "" : "embed.";
  const int zero = ctx.e.parallel.zero_stage;
  Params p;
  p.weights = ctx.buffer(r, base + "weights", BufferRole::weight, DType::bf16, {n}, per_layer);
  if (zero >= 1) p.shard = ctx.buffer(r, base + "weights.shard", BufferRole::weight, DType::bf16, {shard}, per_layer);
  p.grad = ctx.buffer(r, base + "wgrad", BufferRole::gradient, DType::bf16, {n}, per_layer);
  if (zero >= 1) p.grad_shard = ctx.buffer(r, base + "wgrad.shard", BufferRole::gradient, DType::bf16, {shard}, per_layer);
  memo = p;
  return p;
}

// Gradients and ZeRO parameter gathers are bf16; ZeRO shards over every rank,
// since all of them hold a replica of the weights (no tensor parallelism).
int64_t param_bytes(int64_t params) { return params * kBf16Bytes; }

void gather_params(StepContext& ctx, int layer, int64_t params, Phase phase, RankDeps& ready) {
  RankDeps own(ready.size());  // a prefetch: it waits for nothing but its stream
  auto ids = ctx.collective(ctx.world_group, OpKind::all_gather, param_bytes(params), {phase, layer, -1},
                            &RankStreams::dp, own, 0);
  for (size_t r = 0; r < ids.size(); ++r) {  // the world group lists every rank in order
    const Params p = params_of(ctx, int(r), layer);
    ctx.access(ids[r], {p.shard}, {p.weights});
  }
  for (size_t r = 0; r < ready.size(); ++r) ready[r].insert(ready[r].end(), own[r].begin(), own[r].end());
}

void reduce_grads(StepContext& ctx, int layer, int64_t params, const RankDeps& after, std::vector<OpId>& last) {
  RankDeps deps = after;  // the layer's weight gradients are done; the compute stream goes on
  const OpKind k = ctx.e.parallel.zero_stage == 0 ? OpKind::all_reduce : OpKind::reduce_scatter;
  last = ctx.collective(ctx.world_group, k, param_bytes(params), {Phase::backward, layer, -1}, &RankStreams::dp, deps, 0);
  for (size_t r = 0; r < last.size(); ++r) {
    const Params p = params_of(ctx, int(r), layer);
    ctx.access(last[r], {p.grad}, {k == OpKind::all_reduce ? p.grad : p.grad_shard});
  }
}

// One decoder layer: forward, then (when its backward comes) the checkpoint
// policy's recomputation and the backward.
void layer_forward(StepContext& ctx, int layer, RankDeps& ready) {
  emit_layer_forward(ctx, {Phase::forward, layer, true}, ready);
}
void layer_backward(StepContext& ctx, int layer, RankDeps& ready) {
  const Checkpoint ck = ctx.e.parallel.checkpoint;
  if (ck != Checkpoint::none) emit_layer_forward(ctx, {Phase::recompute, layer, ck == Checkpoint::full}, ready);
  emit_layer_backward(ctx, layer, ck == Checkpoint::selective, ready);
}

void training_step(StepContext& ctx, RankDeps& ready) {
  const Experiment& e = ctx.e;
  const Model& m = e.model;
  const int world = e.parallel.world(), zero = e.parallel.zero_stage;
  const bool collectives = world > 1;
  const int64_t n = ctx.local_tokens();
  const int64_t embed_params = m.vocab * m.hidden * (m.tied_embeddings ? 1 : 2) + m.hidden;
  // io(r) gives the op's reads and writes on rank r.
  auto every_rank = [&](OpKind k, Where w, double flops, int64_t tokens, auto io) {
    for (int r = 0; r < world; ++r) {
      const OpId id = ctx.compute(r, k, w, {flops, 0, tokens}, ready);
      auto [reads, writes] = io(r);
      ctx.access(id, std::move(reads), std::move(writes));
      if (k == OpKind::gemm) ctx.b.set_gemm(id, {n, m.vocab, m.hidden});  // the LM head
    }
  };
  using RW = std::pair<std::vector<int>, std::vector<int>>;
  auto act = [&](int r, const char* name, int64_t width) {
    return ctx.buffer(r, name, BufferRole::activation, DType::bf16, {n, width});
  };
  auto embed = [&](int r) { return params_of(ctx, r, -1); };
  auto dx = [&](int r) { return layer_buffers(ctx, r).dx; };
  auto zero3_gather = [&](int layer, int64_t params, Phase phase) {
    if (collectives && zero == 3) gather_params(ctx, layer, params, phase, ready);
  };

  zero3_gather(-1, embed_params, Phase::forward);
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.hidden), n,  // embedding lookup
             [&](int r) { return RW{{embed(r).weights}, {layer_input(ctx, r, 0)}}; });
  for (int l = 0; l < m.layers; ++l) {
    zero3_gather(l, m.layer_params(), Phase::forward);
    layer_forward(ctx, l, ready);
  }
  // Final norm, LM head, cross-entropy; then their backward.
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.hidden) * kNormFlopsPerElement, n,
             [&](int r) { return RW{{layer_input(ctx, r, m.layers), embed(r).weights}, {act(r, "xf", m.hidden)}}; });
  every_rank(OpKind::gemm, {Phase::forward, -1, -1}, gemm_flops(n, m.vocab, m.hidden), n,
             [&](int r) { return RW{{act(r, "xf", m.hidden), embed(r).weights}, {act(r, "logits", m.vocab)}}; });
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.vocab) * kSwigluFlopsPerElement, n,
             [&](int r) { return RW{{act(r, "logits", m.vocab)}, {act(r, "loss", 1)}}; });
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.vocab) * kSwigluFlopsPerElement, n,
             [&](int r) { return RW{{act(r, "logits", m.vocab), act(r, "loss", 1)}, {act(r, "dlogits", m.vocab)}}; });
  every_rank(OpKind::gemm, {Phase::backward, -1, -1}, gemm_flops(n, m.vocab, m.hidden) * kGemmBwdFlopsRatio, n,
             [&](int r) {
               return RW{{act(r, "dlogits", m.vocab), act(r, "xf", m.hidden), embed(r).weights},
                         {act(r, "dxf", m.hidden), embed(r).grad}};
             });
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.hidden) * kNormFlopsPerElement, n,
             [&](int r) {
               return RW{{act(r, "dxf", m.hidden), layer_input(ctx, r, m.layers), embed(r).weights}, {dx(r)}};
             });

  std::vector<OpId> last_grad;
  for (int l = m.layers - 1; l >= 0; --l) {
    zero3_gather(l, m.layer_params(), Phase::backward);
    layer_backward(ctx, l, ready);
    if (collectives) reduce_grads(ctx, l, m.layer_params(), ready, last_grad);  // overlaps the next layer
  }
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.hidden), n,  // embedding grad scatter
             [&](int r) { return RW{{dx(r)}, {embed(r).grad}}; });
  if (collectives) {
    reduce_grads(ctx, -1, embed_params, ready, last_grad);
    for (int r = 0; r < world; ++r) ready[size_t(r)].push_back(last_grad[size_t(r)]);
  }
  // AdamW on the rank's shard of the parameters (all of them without ZeRO).
  const double shard = double(m.params()) / (zero >= 1 ? world : 1);
  // Outside the layers, a per-layer buffer stands for every layer's instance.
  const bool sharded = zero >= 1 && collectives;
  every_rank(OpKind::elementwise, {Phase::optimizer, -1, -1}, shard * kAdamFlopsPerParam, 0, [&](int r) {
    const Params lp = params_of(ctx, r, 0), ep = embed(r);
    return sharded ? RW{{lp.grad_shard, ep.grad_shard}, {lp.shard, ep.shard}} : RW{{lp.grad, ep.grad}, {lp.weights, ep.weights}};
  });
  if (collectives && (zero == 1 || zero == 2)) {  // updated shards back to every replica
    auto gather = [&](int l, int64_t params) {
      auto ids = ctx.collective(ctx.world_group, OpKind::all_gather, param_bytes(params), {Phase::optimizer, l, -1},
                                &RankStreams::dp, ready, 0);
      for (size_t r = 0; r < ids.size(); ++r) {
        const Params p = params_of(ctx, int(r), l);
        ctx.access(ids[r], {p.shard}, {p.weights});
      }
    };
    for (int l = 0; l < m.layers; ++l) gather(l, m.layer_params());
    gather(-1, embed_params);
  }
}

}  // namespace

schedule::Schedule generate_step(const Experiment& e, const sparsity::SparsityModel& patterns, const topology::Topology& topo,
                                 placement::WorkCache* cache) {
  StepContext ctx(e, patterns, topo, cache);
  RankDeps ready(size_t(e.parallel.world()));
  const int l = e.scope_layer;
  switch (e.scope) {
    case Scope::attention_fwd: emit_attention(ctx, {Phase::forward, l, false, false}, ready); break;
    case Scope::attention_fwd_bwd:
      emit_attention(ctx, {Phase::forward, l, false, false}, ready);
      emit_attention(ctx, {Phase::backward, l, true, false}, ready);
      break;
    case Scope::layer:
      layer_forward(ctx, l, ready);
      layer_backward(ctx, l, ready);
      break;
    case Scope::step: training_step(ctx, ready); break;
  }
  return std::move(ctx.b).build();
}

}  // namespace rm::generate
