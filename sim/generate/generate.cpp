#include "sim/generate/generate.hpp"

#include "sim/generate/attention.hpp"
#include "sim/generate/decoder_layer.hpp"
#include "sim/generate/layer_costs.hpp"

namespace rm::generate {

using schedule::OpKind;
using schedule::Phase;
using schedule::Where;

namespace {

// Gradients and ZeRO parameter gathers are bf16; ZeRO shards over every rank,
// since all of them hold a replica of the weights (no tensor parallelism).
int64_t param_bytes(int64_t params) { return params * kBf16Bytes; }

void gather_params(StepContext& ctx, int layer, int64_t params, Phase phase, RankDeps& ready) {
  RankDeps own(ready.size());  // a prefetch: it waits for nothing but its stream
  ctx.collective(ctx.world_group, OpKind::all_gather, param_bytes(params), {phase, layer, -1}, &RankStreams::dp, own,
                 0);
  for (size_t r = 0; r < ready.size(); ++r) ready[r].insert(ready[r].end(), own[r].begin(), own[r].end());
}

void reduce_grads(StepContext& ctx, int layer, int64_t params, const RankDeps& after, std::vector<OpId>& last) {
  RankDeps deps = after;  // the layer's weight gradients are done; the compute stream goes on
  const OpKind k = ctx.e.parallel.zero_stage == 0 ? OpKind::all_reduce : OpKind::reduce_scatter;
  last = ctx.collective(ctx.world_group, k, param_bytes(params), {Phase::backward, layer, -1}, &RankStreams::dp, deps, 0);
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
  auto every_rank = [&](OpKind k, Where w, double flops, int64_t tokens) {
    for (int r = 0; r < world; ++r) ctx.compute(r, k, w, {flops, 0, tokens}, ready);
  };
  auto zero3_gather = [&](int layer, int64_t params, Phase phase) {
    if (collectives && zero == 3) gather_params(ctx, layer, params, phase, ready);
  };

  zero3_gather(-1, embed_params, Phase::forward);
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.hidden), n);  // embedding lookup
  for (int l = 0; l < m.layers; ++l) {
    zero3_gather(l, m.layer_params(), Phase::forward);
    layer_forward(ctx, l, ready);
  }
  // Final norm, LM head, cross-entropy; then their backward.
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.hidden) * kNormFlopsPerElement, n);
  every_rank(OpKind::gemm, {Phase::forward, -1, -1}, gemm_flops(n, m.vocab, m.hidden), n);
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.vocab) * kSwigluFlopsPerElement, n);
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.vocab) * kSwigluFlopsPerElement, n);
  every_rank(OpKind::gemm, {Phase::backward, -1, -1}, gemm_flops(n, m.vocab, m.hidden) * kGemmBwdFlopsRatio, n);
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.hidden) * kNormFlopsPerElement, n);

  std::vector<OpId> last_grad;
  for (int l = m.layers - 1; l >= 0; --l) {
    zero3_gather(l, m.layer_params(), Phase::backward);
    layer_backward(ctx, l, ready);
    if (collectives) reduce_grads(ctx, l, m.layer_params(), ready, last_grad);  // overlaps the next layer
  }
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.hidden), n);  // embedding grad scatter
  if (collectives) {
    reduce_grads(ctx, -1, embed_params, ready, last_grad);
    for (int r = 0; r < world; ++r) ready[size_t(r)].push_back(last_grad[size_t(r)]);
  }
  // AdamW on the rank's shard of the parameters (all of them without ZeRO).
  const double shard = double(m.params()) / (zero >= 1 ? world : 1);
  every_rank(OpKind::elementwise, {Phase::optimizer, -1, -1}, shard * kAdamFlopsPerParam, 0);
  if (collectives && (zero == 1 || zero == 2)) {  // updated shards back to every replica
    for (int l = 0; l < m.layers; ++l)
      ctx.collective(ctx.world_group, OpKind::all_gather, param_bytes(m.layer_params()), {Phase::optimizer, l, -1},
                     &RankStreams::dp, ready, 0);
    ctx.collective(ctx.world_group, OpKind::all_gather, param_bytes(embed_params), {Phase::optimizer, -1, -1},
                   &RankStreams::dp, ready, 0);
  }
}

}  // namespace

schedule::Schedule generate_step(const Experiment& e, const sparsity::SparsityModel& patterns, const Topology& topo,
                                 placement::WorkCache* cache) {
  StepContext ctx(e, patterns, topo, cache);
  RankDeps ready(size_t(e.parallel.world()));
  switch (e.scope) {
    case Scope::attention_fwd: emit_attention(ctx, {Phase::forward, 0, false, false}, ready); break;
    case Scope::attention_fwd_bwd:
      emit_attention(ctx, {Phase::forward, 0, false, false}, ready);
      emit_attention(ctx, {Phase::backward, 0, true, false}, ready);
      break;
    case Scope::layer:
      layer_forward(ctx, 0, ready);
      layer_backward(ctx, 0, ready);
      break;
    case Scope::step: training_step(ctx, ready); break;
  }
  return std::move(ctx.b).build();
}

}  // namespace rm::generate
