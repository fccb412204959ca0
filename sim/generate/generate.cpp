#include "sim/generate/generate.hpp"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "sim/generate/attention.hpp"
#include "sim/generate/decoder_layer.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/placement/device_map.hpp"

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
  const int tp = ctx.e.parallel.tp, replicas = ctx.e.parallel.replicas();
  const int64_t n = of_layer ? tp_layer_params(m, tp) : tp_embed_params(m, tp);
  const int64_t shard = (n + replicas - 1) / replicas;
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

// Gradients and ZeRO parameter gathers are bf16; ZeRO shards over the ranks that hold
// a replica of the rank's weights: every rank with the same tensor rank (the world with tp = 1).
int64_t param_bytes(int64_t params) { return params * kBf16Bytes; }

// One collective per replica group; on each member it reads `reads` and writes `writes` of
// the layer's parameters. Returns the ops by rank.
template <class Reads, class Writes>
std::vector<OpId> over_replicas(StepContext& ctx, OpKind k, int layer, int64_t params, Where where, RankDeps& ready,
                                Reads reads, Writes writes) {
  std::vector<OpId> by_rank(ready.size(), -1);
  for (int g : ctx.replica_groups) {
    auto ids = ctx.collective(g, k, param_bytes(params), where, &RankStreams::dp, ready, 0);
    const auto members = ctx.b.peek().groups[size_t(g)].ranks;
    for (size_t i = 0; i < ids.size(); ++i) {
      const Params p = params_of(ctx, members[i], layer);
      ctx.access(ids[i], {p.*reads}, {p.*writes});
      by_rank[size_t(members[i])] = ids[i];
    }
  }
  return by_rank;
}

void gather_params(StepContext& ctx, int layer, int64_t params, Phase phase, RankDeps& ready) {
  RankDeps own(ready.size());  // a prefetch: it waits for nothing but its stream
  over_replicas(ctx, OpKind::all_gather, layer, params, {phase, layer, -1}, own, &Params::shard, &Params::weights);
  for (size_t r = 0; r < ready.size(); ++r) ready[r].insert(ready[r].end(), own[r].begin(), own[r].end());
}

void reduce_grads(StepContext& ctx, int layer, int64_t params, const RankDeps& after, std::vector<OpId>& last) {
  RankDeps deps = after;  // the layer's weight gradients are done; the compute stream goes on
  const bool all_reduce = ctx.e.parallel.zero_stage == 0;
  last = over_replicas(ctx, all_reduce ? OpKind::all_reduce : OpKind::reduce_scatter, layer, params,
                       {Phase::backward, layer, -1}, deps, &Params::grad, all_reduce ? &Params::grad : &Params::grad_shard);
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
  const int world = ctx.sim_world, zero = e.parallel.zero_stage, tp = e.parallel.tp;
  const bool collectives = e.parallel.replicas() > 1;  // gradients to reduce
  const bool split = ctx.tensor_parallel();
  // Tokens of the GEMMs (with tp > 1 after the tensor group's all-gather) and of the
  // sequence-parallel ops; the rank's vocabulary shard (Megatron's vocab-parallel
  // embedding, LM head and cross-entropy).
  const int64_t n = ctx.local_tokens(), ns = ctx.sp_tokens(), vocab = tp_vocab(m, tp);
  const int64_t embed_params = tp_embed_params(m, tp);
  // io(r) gives the op's reads and writes on rank r.
  auto every_rank = [&](OpKind k, Where w, double flops, int64_t tokens, auto io) {
    for (int r = 0; r < world; ++r) {
      const OpId id = ctx.compute(r, k, w, {flops, 0, tokens}, ready);
      auto [reads, writes] = io(r);
      ctx.access(id, std::move(reads), std::move(writes));
      if (k == OpKind::gemm) ctx.b.set_gemm(id, {n, vocab, m.hidden});  // the LM head
    }
  };
  using RW = std::pair<std::vector<int>, std::vector<int>>;
  auto act = [&](int r, const char* name, int64_t tokens, int64_t width) {
    return ctx.buffer(r, name, BufferRole::activation, DType::bf16, {tokens, width});
  };
  // With tp > 1 the tensor group all-gathers (or reduce-scatters) the hidden states.
  auto tp_exchange = [&](OpKind k, Where w, auto io) {
    if (split) tensor_collective(ctx, k, w, tensor_collective_bytes(ctx), ready, io);
  };
  // What the LM head reads and what its backward writes: all local tokens with tp > 1.
  auto xf_full = [&](int r) { return split ? act(r, "xf.full", n, m.hidden) : act(r, "xf", ns, m.hidden); };
  auto dxf_part = [&](int r) { return split ? act(r, "dxf.part", n, m.hidden) : act(r, "dxf", ns, m.hidden); };
  auto embed = [&](int r) { return params_of(ctx, r, -1); };
  auto dx = [&](int r) { return layer_buffers(ctx, r).dx; };
  auto zero3_gather = [&](int layer, int64_t params, Phase phase) {
    if (collectives && zero == 3) gather_params(ctx, layer, params, phase, ready);
  };
  const int64_t layer_params = tp_layer_params(m, tp);

  zero3_gather(-1, embed_params, Phase::forward);
  // Embedding lookup: with tp > 1 each rank fills the rows of its vocabulary shard (1/tp of
  // the tokens on average) into a partial sum that the reduce-scatter completes.
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * m.hidden) / tp, n, [&](int r) {
    return RW{{embed(r).weights}, {split ? act(r, "x0.part", n, m.hidden) : layer_input(ctx, r, 0)}};
  });
  tp_exchange(OpKind::reduce_scatter, {Phase::forward, -1, -1},
              [&](int r) { return RW{{act(r, "x0.part", n, m.hidden)}, {layer_input(ctx, r, 0)}}; });
  for (int l = 0; l < m.layers; ++l) {
    zero3_gather(l, layer_params, Phase::forward);
    layer_forward(ctx, l, ready);
    ctx.cut_here();
  }
  // Final norm, LM head, cross-entropy; then their backward.
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(ns * m.hidden) * kNormFlopsPerElement, ns,
             [&](int r) { return RW{{layer_input(ctx, r, m.layers), embed(r).weights}, {act(r, "xf", ns, m.hidden)}}; });
  tp_exchange(OpKind::all_gather, {Phase::forward, -1, -1},
              [&](int r) { return RW{{act(r, "xf", ns, m.hidden)}, {xf_full(r)}}; });
  every_rank(OpKind::gemm, {Phase::forward, -1, -1}, gemm_flops(n, vocab, m.hidden), n,
             [&](int r) { return RW{{xf_full(r), embed(r).weights}, {act(r, "logits", n, vocab)}}; });
  every_rank(OpKind::elementwise, {Phase::forward, -1, -1}, double(n * vocab) * kSwigluFlopsPerElement, n,
             [&](int r) { return RW{{act(r, "logits", n, vocab)}, {act(r, "loss", n, 1)}}; });
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * vocab) * kSwigluFlopsPerElement, n,
             [&](int r) { return RW{{act(r, "logits", n, vocab), act(r, "loss", n, 1)}, {act(r, "dlogits", n, vocab)}}; });
  every_rank(OpKind::gemm, {Phase::backward, -1, -1}, gemm_flops(n, vocab, m.hidden) * kGemmBwdFlopsRatio, n,
             [&](int r) {
               return RW{{act(r, "dlogits", n, vocab), xf_full(r), embed(r).weights}, {dxf_part(r), embed(r).grad}};
             });
  tp_exchange(OpKind::reduce_scatter, {Phase::backward, -1, -1},
              [&](int r) { return RW{{dxf_part(r)}, {act(r, "dxf", ns, m.hidden)}}; });
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(ns * m.hidden) * kNormFlopsPerElement, ns,
             [&](int r) {
               return RW{{act(r, "dxf", ns, m.hidden), layer_input(ctx, r, m.layers), embed(r).weights}, {dx(r)}};
             });

  std::vector<OpId> last_grad;
  for (int l = m.layers - 1; l >= 0; --l) {
    zero3_gather(l, layer_params, Phase::backward);
    layer_backward(ctx, l, ready);
    if (collectives) reduce_grads(ctx, l, layer_params, ready, last_grad);  // overlaps the next layer
    ctx.cut_here();
  }
  // Embedding gradient: scattered into the rank's vocabulary shard from all local tokens.
  tp_exchange(OpKind::all_gather, {Phase::backward, -1, -1},
              [&](int r) { return RW{{dx(r)}, {act(r, "dx0.full", n, m.hidden)}}; });
  every_rank(OpKind::elementwise, {Phase::backward, -1, -1}, double(n * m.hidden) / tp, n,  // embedding grad scatter
             [&](int r) { return RW{{split ? act(r, "dx0.full", n, m.hidden) : dx(r)}, {embed(r).grad}}; });
  if (collectives) {
    reduce_grads(ctx, -1, embed_params, ready, last_grad);
    for (int r = 0; r < world; ++r) ready[size_t(r)].push_back(last_grad[size_t(r)]);
  }
  // AdamW on the rank's shard of the parameters (all of its tensor shard without ZeRO).
  const double shard = double(int64_t(m.layers) * layer_params + embed_params) / (zero >= 1 ? e.parallel.replicas() : 1);
  // Outside the layers, a per-layer buffer stands for every layer's instance.
  const bool sharded = zero >= 1 && collectives;
  every_rank(OpKind::elementwise, {Phase::optimizer, -1, -1}, shard * kAdamFlopsPerParam, 0, [&](int r) {
    const Params lp = params_of(ctx, r, 0), ep = embed(r);
    return sharded ? RW{{lp.grad_shard, ep.grad_shard}, {lp.shard, ep.shard}} : RW{{lp.grad, ep.grad}, {lp.weights, ep.weights}};
  });
  if (collectives && (zero == 1 || zero == 2)) {  // updated shards back to every replica
    auto gather = [&](int l, int64_t params) {
      over_replicas(ctx, OpKind::all_gather, l, params, {Phase::optimizer, l, -1}, ready, &Params::shard,
                    &Params::weights);
    };
    for (int l = 0; l < m.layers; ++l) gather(l, layer_params);
    gather(-1, embed_params);
  }
}

}  // namespace

namespace {

// The experiment's scope into ctx's builder.
void emit_scope(StepContext& ctx) {
  const Experiment& e = ctx.e;
  RankDeps ready(size_t(ctx.sim_world));
  const int l = e.scope_layer;
  switch (e.scope) {
    case Scope::attention_fwd: emit_attention(ctx, {Phase::forward, l, false, false}, ready); break;
    case Scope::attention_fwd_bwd:
      emit_attention(ctx, {Phase::forward, l, false, false}, ready);
      ctx.cut_here();
      emit_attention(ctx, {Phase::backward, l, true, false}, ready);
      break;
    case Scope::layer:
      layer_forward(ctx, l, ready);
      ctx.cut_here();
      layer_backward(ctx, l, ready);
      break;
    case Scope::step: training_step(ctx, ready); break;
  }
}

}  // namespace

schedule::Schedule generate_step(const Experiment& e, const sparsity::SparsityModel& patterns, const topology::Topology& topo,
                                 placement::WorkCache* cache, Replicas replicas, Accesses accesses) {
  StepContext ctx(e, patterns, topo, cache, replicas == Replicas::one);
  ctx.with_accesses = accesses == Accesses::all;
  // Sized once from the exact count (footprint.hpp): the op array neither grows
  // by doubling nor is copied to shed its slack at build().
  try {
    ctx.b.reserve_ops(size_t(replicas == Replicas::one ? count_replica_ops(e) : count_step_ops(e)));
  } catch (const ConfigError&) {
    // emit_scope throws the generator's own error for the same experiment
  }
  emit_scope(ctx);
  if (!ctx.with_accesses) ctx.b.drop_buffers();
  return std::move(ctx.b).build();
}

void generate_step_chunks(const Experiment& e, const sparsity::SparsityModel& patterns, const topology::Topology& topo,
                          placement::WorkCache* cache, Replicas replicas, const ChunkSink& sink, bool ring_steps,
                          Accesses accesses) {
  StepContext ctx(e, patterns, topo, cache, replicas == Replicas::one);
  ctx.with_accesses = accesses == Accesses::all;
  ctx.cut = [&] {
    schedule::OpChunk chunk = ctx.b.take_ops();
    if (!chunk.ops.empty()) sink(ctx.b.peek(), std::move(chunk), false);
  };
  ctx.cut_ring_steps = ring_steps && ring_step_cuts_apply(e, replicas);
  emit_scope(ctx);
  sink(ctx.b.peek(), ctx.b.take_ops(), true);
}

}  // namespace rm::generate

namespace rm::generate {

bool ring_step_cuts_apply(const Experiment& e, Replicas replicas) {
  const int groups = (replicas == Replicas::one ? 1 : e.parallel.dp) * e.parallel.hp * e.parallel.tp;
  return groups == 1 && e.parallel.zero_stage != 3 && e.parallel.cp > 1;
}

std::string replica_refusal(const Experiment& e, const topology::Topology& topo) {
  const Parallel& p = e.parallel;
  if (p.dp < 2) return "dp = 1: there is one replica";
  const placement::DeviceMap map(p);
  const int R = p.world() / p.dp;
  // Replica d must be replica 0 translated by d * R GPUs, rank for rank.
  for (int d = 1; d < p.dp; ++d)
    for (int h = 0; h < p.hp; ++h)
      for (int c = 0; c < p.cp; ++c)
        for (int t = 0; t < p.tp; ++t)
          if (map.gpu(d, h, c, t) != map.gpu(0, h, c, t) + d * R)
            return fmt::format("replica {} is not replica 0 shifted by {} GPUs", d, d * R);
  // Ring layouts follow the nodes; every replica's must be replica 0's.
  const auto kind = make_attention_kind(e);
  for (int h = 0; h < p.hp; ++h)
    for (int t = 0; t < p.tp; ++t) {
      const auto base = kind->layout(map.context_group(0, h, t), topo).rings;
      for (int d = 1; d < p.dp; ++d)
        if (kind->layout(map.context_group(d, h, t), topo).rings != base)
          return fmt::format("replica {}'s ring layout differs from replica 0's (its GPUs sit on the nodes differently)", d);
    }
  return "";
}

}  // namespace rm::generate
