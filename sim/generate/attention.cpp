#include "sim/generate/attention.hpp"

#include <functional>
#include <string_view>

#include "sim/generate/index_building.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/generate/ring_emitter.hpp"

namespace rm::generate {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpKind;
using schedule::Phase;
using schedule::Where;

namespace {
// Name suffixes of the Q|K|V and O|LSE a pass uses. A recomputation writes its
// own (the forward's may still be on their way round the ring): the full one
// all four, the selective one (no attention) the Q|K|V its backward exchanges again.
struct Sets {
  const char* qkv;
  const char* o;
};
Sets sets_for(const StepContext& ctx, Phase phase) {
  const bool recomputes = ctx.e.scope == Scope::layer || ctx.e.scope == Scope::step;
  if (phase == Phase::forward || !recomputes) return {"", ""};
  switch (ctx.e.parallel.checkpoint) {
    case Checkpoint::full: return {".re", ".re"};
    case Checkpoint::selective: return {".bwd", ""};
    case Checkpoint::none: break;
  }
  return {"", ""};
}
}  // namespace

AttentionTensors attention_tensors(StepContext& ctx, int r, Phase phase) {
  auto& memo = ctx.memo.attention[size_t(r)][size_t(phase)];
  if (memo) return *memo;
  const Experiment& e = ctx.e;
  const Sets sets = sets_for(ctx, phase);
  const placement::HeadShard s = ctx.heads_of(r);
  const int64_t b = e.workload.batch, T = e.workload.seq_len / e.parallel.cp, D = e.model.head_dim;
  const std::vector<int64_t> q{b, T, s.heads, D}, kv{2, b, T, s.kv_heads, D};
  AttentionTensors t;
  t.q = ctx.buffer(r, std::string("q") + sets.qkv, BufferRole::q, DType::bf16, q, kPerLayer);
  t.kv = ctx.buffer(r, std::string("kv") + sets.qkv, BufferRole::kv, DType::bf16, kv, kPerLayer);
  t.o = ctx.buffer(r, std::string("o") + sets.o, BufferRole::o, DType::bf16, q, kPerLayer);
  t.lse = ctx.buffer(r, std::string("lse") + sets.o, BufferRole::lse, DType::fp32, {b, s.heads, T}, kPerLayer);
  if (ctx.has_backward()) {
    t.d_o = ctx.buffer(r, "do", BufferRole::d_o, DType::bf16, q);
    t.dq = ctx.buffer(r, "dq", BufferRole::dq, DType::bf16, q);
    t.dkv = ctx.buffer(r, "dkv", BufferRole::dkv, grad_dtype(e), kv);
  }
  if (ctx.patterns_dynamic) {  // the index this pass builds (a recomputation builds its own)
    const IndexSizes z = index_sizes(e);
    const int64_t cp = e.parallel.cp, nb = z.blocks;
    t.index = ctx.buffer(r, std::string("index") + sets.o, BufferRole::index, DType::int32, {cp, b, s.heads, nb, nb},
                         kPerLayer);
    t.index_bars = ctx.buffer(r, std::string("index.bars") + sets.o, BufferRole::index, DType::int32,
                              {b, s.heads, nb, z.verticals}, kPerLayer);
  }
  memo = t;
  return t;
}

namespace {

// Exchanges between the dense layout and the ring's: the head all-to-all (hp > 1),
// then the stripe shuffle. Stage 0 is the dense layout, the last stage the
// attention's own buffers; a stage in between holds the head layout before the shuffle.
int exchange_count(const StepContext& ctx) { return (ctx.e.parallel.hp > 1 ? 1 : 0) + (ctx.shuffles() ? 1 : 0); }

// `home` (an attention buffer) as it is at `stage`; narrowed to bf16 outside the ring.
// The dense layout of the attention output is kept per layer: the backward reads it.
int stage_buffer(StepContext& ctx, int r, int home, int stage) {
  const int n = exchange_count(ctx);
  if (stage == n) return home;
  std::vector<int>& memo = ctx.memo.stage;
  const size_t at = size_t(home) * BufferMemo::kStages + size_t(stage);
  if (at < memo.size() && memo[at] >= 0) return memo[at];
  const schedule::Buffer& h = ctx.b.peek().buffers[size_t(home)];
  const auto keep = stage == 0 && h.role == BufferRole::o ? kPerLayer : schedule::Instances::one;
  std::string name = h.name + (stage == 0 ? ".seq" : ".pre");
  std::vector<int64_t> shape = h.shape;  // copied: declaring a buffer may move the table `h` lives in
  const int id = ctx.buffer(r, name, BufferRole::exchange, DType::bf16, std::move(shape), keep);
  if (memo.size() <= at) memo.resize(at + 1, -1);
  memo[at] = id;
  return id;
}

std::vector<int> parts_in(StepContext& ctx, int r, Phase phase, bool backward) {
  const AttentionTensors t = attention_tensors(ctx, r, phase);
  if (!backward) return {t.q, t.kv};
  if (std::string_view(sets_for(ctx, phase).qkv) == ".bwd") return {t.d_o, t.q, t.kv};  // exchanged again
  return {t.d_o};
}

std::vector<int> parts_out(StepContext& ctx, int r, Phase phase, bool backward) {
  const AttentionTensors t = attention_tensors(ctx, r, phase);
  if (!backward) return {t.o};
  return {t.dq, t.dkv};
}

std::vector<int> at_stage(StepContext& ctx, int r, const std::vector<int>& homes, int stage) {
  std::vector<int> out;
  for (int h : homes) out.push_back(stage_buffer(ctx, r, h, stage));
  return out;
}

}  // namespace

IndexInputs index_inputs(StepContext& ctx, int r, Phase phase) {
  const AttentionTensors t = attention_tensors(ctx, r, phase);
  if (!ctx.shuffles()) return {t.q, t.kv, false};
  const int stage = ctx.e.parallel.hp > 1 ? 1 : 0;  // after the head all-to-all
  return {stage_buffer(ctx, r, t.q, stage), stage_buffer(ctx, r, t.kv, stage), true};
}

std::vector<int> attention_inputs(StepContext& ctx, int r, Phase phase, bool backward) {
  return at_stage(ctx, r, parts_in(ctx, r, phase, backward), 0);
}
std::vector<int> attention_outputs(StepContext& ctx, int r, Phase phase, bool backward) {
  return at_stage(ctx, r, parts_out(ctx, r, phase, backward), 0);
}

namespace {

// Bytes of one rank's exchange buffers, for the S/cp tokens of a context rank and
// the heads of one head rank on one tensor rank (every one holds as many).
struct ExchangeBytes {
  int64_t q = 0;   // Q, O, dO or dQ
  int64_t kv = 0;  // K and V (or dK and dV)
};

ExchangeBytes exchange_bytes(const Experiment& e) {
  const placement::HeadShard s = placement::head_shard(e.model, e.parallel, 0, 0);
  const int64_t tokens = e.workload.seq_len / e.parallel.cp;
  return {head_bytes(tokens, s.heads, e.model.head_dim, e.workload.batch),
          kv_message_bytes(tokens, s.kv_heads, e.model.head_dim, e.workload.batch)};
}

// One all-to-all per group; on each member it moves `homes` from stage `from` to stage `to`.
void all_to_all_everywhere(StepContext& ctx, const std::vector<int>& groups, int64_t bytes, Where where,
                           RankDeps& ready, const std::function<std::vector<int>(int rank)>& homes, int from,
                           int to) {
  for (int g : groups) {
    auto ids = ctx.collective(g, OpKind::all_to_all, bytes, where, &RankStreams::exchange, ready, 0);
    const auto members = ctx.b.peek().groups[size_t(g)].ranks;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto h = homes(members[i]);
      ctx.access(ids[i], at_stage(ctx, members[i], h, from), at_stage(ctx, members[i], h, to));
    }
  }
}

// The shuffle as MTraining runs it: one all-to-all per tensor (Q, K|V, O; dO, dQ,
// dK|dV), each in every shuffle group; a tensor's bytes are the whole local
// tensor, also in a zigzag pair (half of it stays).
void shuffle_everywhere(StepContext& ctx, Where where, RankDeps& ready,
                        const std::function<std::vector<int>(int rank)>& homes, int from, int to) {
  const ExchangeBytes x = exchange_bytes(ctx.e);
  const auto& buffers = ctx.b.peek().buffers;
  const size_t n = homes(0).size();
  for (size_t i = 0; i < n; ++i) {
    const schedule::BufferRole role = buffers[size_t(homes(0)[i])].role;
    const int64_t bytes = role == BufferRole::kv || role == BufferRole::dkv ? x.kv : x.q;
    for (const auto& groups : ctx.shuffle_groups)
      all_to_all_everywhere(ctx, groups, bytes, where, ready, [&](int r) { return std::vector<int>{homes(r)[i]}; },
                            from, to);
  }
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

  auto ins = [&](int r) { return parts_in(ctx, r, call.phase, call.backward); };
  auto outs = [&](int r) { return parts_out(ctx, r, call.phase, call.backward); };
  int stage = 0;
  if (p.hp > 1) all_to_all_everywhere(ctx, ctx.head_groups, in, where, ready, ins, stage, stage + 1), ++stage;
  // Every forward and every recomputation of the attention builds its index,
  // before the per-call shuffle (index_inputs).
  if (ctx.patterns_dynamic && !call.backward)
    for (int d = 0; d < ctx.sim_dp; ++d)
      for (int h = 0; h < p.hp; ++h)
        for (int t = 0; t < p.tp; ++t) emit_index_building(ctx, d, h, t, call.phase, call.layer, ready);
  if (ctx.shuffles()) shuffle_everywhere(ctx, where, ready, ins, stage, stage + 1), ++stage;
  if (ctx.patterns_dynamic && call.backward)  // the backward's own view of the block mask
    for (int d = 0; d < ctx.sim_dp; ++d)
      for (int h = 0; h < p.hp; ++h)
        for (int t = 0; t < p.tp; ++t) emit_backward_index_conversion(ctx, d, h, t, call.phase, call.layer, ready);
  emit_ring(ctx, call.phase, call.layer, call.backward, ready);
  if (ctx.shuffles()) shuffle_everywhere(ctx, where, ready, outs, stage, stage - 1), --stage;
  if (p.hp > 1) all_to_all_everywhere(ctx, ctx.head_groups, out, where, ready, outs, stage, stage - 1), --stage;
}

}  // namespace rm::generate
