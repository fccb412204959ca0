#include "sim/generate/attention.hpp"

#include "sim/generate/layer_costs.hpp"
#include "sim/generate/ring_emitter.hpp"

namespace rm::generate {

using schedule::OpKind;
using schedule::Phase;
using schedule::Where;

namespace {

// Bytes of one rank's exchange buffers, for the S/cp tokens of a context rank and
// the heads of one head rank (every head rank holds as many).
struct ExchangeBytes {
  int64_t q = 0;   // Q, O, dO or dQ
  int64_t kv = 0;  // K and V (or dK and dV)
};

ExchangeBytes exchange_bytes(const Experiment& e) {
  const HeadShard s = head_shard(e.model, e.parallel.hp, 0);
  const int64_t tokens = e.workload.seq_len / e.parallel.cp;
  return {head_bytes(tokens, s.heads, e.model.head_dim, e.workload.batch),
          kv_message_bytes(tokens, s.kv_heads, e.model.head_dim, e.workload.batch)};
}

void all_to_all_everywhere(StepContext& ctx, const std::vector<int>& groups, int64_t bytes, Where where,
                           RankDeps& ready) {
  for (int g : groups) ctx.collective(g, OpKind::all_to_all, bytes, where, &RankStreams::exchange, ready, 0);
}

// MTraining's online index building for one context group (d, h): every rank
// scores the last queries against its keys, the softmax maxima and sums are
// all-gathered, each rank reduces its columns and diagonals, and the rank that
// owns the last queries broadcasts the selected indices.
void build_indices(StepContext& ctx, int d, int h, int layer, RankDeps& ready) {
  const Experiment& e = ctx.e;
  const int cp = e.parallel.cp, batch = e.workload.batch, dim = e.model.head_dim;
  const int heads = head_shard(e.model, e.parallel.hp, h).heads;
  const int64_t keys = e.workload.seq_len / cp;
  const Where where{Phase::forward, layer, -1};
  // The last queries live with the context rank that owns the last token.
  int owner = 0;
  for (int c = 0; c < cp; ++c) {
    const auto& runs = ctx.work.tokens(c).runs;
    for (const auto& run : runs)
      if (run.begin + (run.count - 1) * run.stride + run.len == e.workload.seq_len) owner = c;
  }
  const int root = ctx.rank(d, h, owner);
  const int group = ctx.context_groups[size_t(d * e.parallel.hp + h)];
  const double lastq = double(kIndexLastQueries * batch);
  if (cp > 1)
    ctx.collective(group, OpKind::broadcast, head_bytes(kIndexLastQueries, heads, dim, batch), where,
                   &RankStreams::exchange, ready, 0, root);
  for (int c = 0; c < cp; ++c)  // QK^T of the last queries, then max and exp-sum per row
    ctx.compute(ctx.rank(d, h, c), OpKind::index_build, where,
                {gemm_flops(int64_t(lastq), keys, dim) * heads + 3.0 * lastq * double(keys) * heads, 0,
                 kIndexLastQueries * batch},
                ready);
  if (cp > 1)
    ctx.collective(group, OpKind::all_gather, cp * kIndexLastQueries * heads * 2 * kFp32Bytes * batch, where,
                   &RankStreams::exchange, ready, 0);
  for (int c = 0; c < cp; ++c)  // normalised column and diagonal sums, top-p candidates
    ctx.compute(ctx.rank(d, h, c), OpKind::index_build, where, {2.0 * lastq * double(keys) * heads, 0, 0}, ready);
  if (cp > 1)
    ctx.collective(group, OpKind::broadcast, heads * (kIndexMaxVerticals + kIndexMaxSlashes) * kFp32Bytes * batch,
                   where, &RankStreams::exchange, ready, 0, root);
}

}  // namespace

void emit_attention(StepContext& ctx, const AttentionCall& call, RankDeps& ready) {
  const Experiment& e = ctx.e;
  const Parallel& p = e.parallel;
  const Where where{call.phase, call.layer, -1};
  const ExchangeBytes x = exchange_bytes(e);
  // Forward: Q, K, V in and O out. Backward: dO in (plus Q, K, V when recomputed
  // in sequence layout) and dQ, dK, dV out.
  const int64_t in = !call.backward ? x.q + x.kv : x.q + (call.qkv_recomputed ? x.q + x.kv : 0);
  const int64_t out = !call.backward ? x.q : x.q + x.kv;

  if (p.hp > 1) all_to_all_everywhere(ctx, ctx.head_groups, in, where, ready);
  if (ctx.shuffles()) all_to_all_everywhere(ctx, ctx.context_groups, in, where, ready);
  if (ctx.patterns_dynamic && call.phase == Phase::forward)
    for (int d = 0; d < p.dp; ++d)
      for (int h = 0; h < p.hp; ++h) build_indices(ctx, d, h, call.layer, ready);
  emit_ring(ctx, call.phase, call.layer, call.backward, ready);
  if (ctx.shuffles()) all_to_all_everywhere(ctx, ctx.context_groups, out, where, ready);
  if (p.hp > 1) all_to_all_everywhere(ctx, ctx.head_groups, out, where, ready);
}

}  // namespace rm::generate
