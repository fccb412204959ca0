#include "sim/generate/ring_emitter.hpp"

#include "sim/generate/layer_costs.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::generate {

using schedule::OpKind;
using schedule::P2PIds;
using schedule::Where;

namespace {

// One context group's ranks and their ring positions.
struct Ring {
  std::vector<int> rank;                  // per context rank c
  std::vector<std::pair<int, int>> pos;   // per context rank c: (o, i)
  const RingLayout* l = nullptr;
  int at(int o, int i) const {
    const int O = l->outer(), I = l->inner();
    return l->rings[size_t(((o % O) + O) % O)][size_t(((i % I) + I) % I)];
  }
};

void append(std::vector<OpId>& v, OpId id) {
  if (id >= 0) v.push_back(id);
}

// Every rank c sends to next(c) and receives from its predecessor, launched
// together; deps[c] must end first on both. Returns per c the ids.
std::vector<P2PIds> shift(StepContext& ctx, const Ring& g, int (*next)(const Ring&, int), int RankStreams::*stream,
                          int64_t bytes, Where where, int64_t tag, const std::vector<std::vector<OpId>>& deps) {
  const int cp = int(g.rank.size());
  std::vector<P2PIds> sent(static_cast<size_t>(cp)), out(static_cast<size_t>(cp));
  std::vector<int> from(static_cast<size_t>(cp));
  for (int c = 0; c < cp; ++c) {
    const int to = next(g, c);
    from[size_t(to)] = c;
    const int sr = g.rank[size_t(c)], rr = g.rank[size_t(to)];
    sent[size_t(c)] = ctx.b.p2p({sr, ctx.streams[size_t(sr)].*stream, rr, ctx.streams[size_t(rr)].*stream, bytes,
                                 where, tag});
  }
  for (int c = 0; c < cp; ++c) {
    out[size_t(c)] = {sent[size_t(c)].send, sent[size_t(from[size_t(c)])].recv};
    const OpId both[2] = {out[size_t(c)].send, out[size_t(c)].recv};
    ctx.b.launch_together(both);
    ctx.b.add_deps(both[0], deps[size_t(c)]);
    ctx.b.add_deps(both[1], deps[size_t(c)]);
  }
  return out;
}

int inner_next(const Ring& g, int c) { return g.at(g.pos[size_t(c)].first, g.pos[size_t(c)].second + 1); }
int outer_next(const Ring& g, int c) { return g.at(g.pos[size_t(c)].first + 1, g.pos[size_t(c)].second); }

void emit_group(StepContext& ctx, int d, int h, schedule::Phase phase, int layer, bool backward, RankDeps& ready) {
  const Experiment& e = ctx.e;
  const RingLayout& l = ctx.layout(d, h);
  const int cp = e.parallel.cp, O = l.outer(), I = l.inner();
  Ring g;
  g.l = &l;
  g.rank.resize(static_cast<size_t>(cp));
  g.pos.resize(static_cast<size_t>(cp));
  for (int c = 0; c < cp; ++c) g.rank[size_t(c)] = ctx.rank(d, h, c);
  for (int o = 0; o < O; ++o)
    for (int i = 0; i < I; ++i) g.pos[size_t(l.rings[size_t(o)][size_t(i)])] = {o, i};

  const HeadShard shard = head_shard(e.model, e.parallel.hp, h);
  const int batch = e.workload.batch, dim = e.model.head_dim;
  const int64_t ctx_tokens = e.workload.seq_len / cp;
  const int64_t kv = kv_message_bytes(ctx_tokens, shard.kv_heads, dim, batch);
  const int64_t dkv = dkv_message_bytes(ctx_tokens, shard.kv_heads, dim, batch);
  const auto& work = ctx.work.pairs(layer, h);
  const double flops_per_nnz =
      cost::attention_fwd_flops_per_nnz(dim) * batch * (backward ? cost::kAttentionBwdFlopsRatio : 1.0);
  const OpKind attn = backward ? OpKind::attn_bwd : OpKind::attn_fwd;

  std::vector<OpId> last_compute(static_cast<size_t>(cp), -1), kv_arrived(static_cast<size_t>(cp), -1), outer_arrived(static_cast<size_t>(cp), -1),
      dkv_inner_arrived(static_cast<size_t>(cp), -1), dkv_outer_arrived(static_cast<size_t>(cp), -1);
  std::vector<std::vector<OpId>> deps(static_cast<size_t>(cp));
  auto start_deps = [&](int c) { return last_compute[size_t(c)] < 0 ? ready[size_t(g.rank[size_t(c)])] : std::vector<OpId>{}; };

  for (int so = 0; so < O; ++so) {
    std::vector<OpId> next_outer(static_cast<size_t>(cp), -1);
    if (so + 1 < O) {
      // The round's block (own at so = 0, else the outer recv) goes on first; the
      // buffer it lands in was last read by the previous round's last compute.
      for (int c = 0; c < cp; ++c) {
        deps[size_t(c)] = start_deps(c);
        append(deps[size_t(c)], last_compute[size_t(c)]);
      }
      auto ids = shift(ctx, g, outer_next, &RankStreams::kv_outer, kv, {phase, layer, so * I}, kTagKvOuter, deps);
      for (int c = 0; c < cp; ++c) next_outer[size_t(c)] = ids[size_t(c)].recv;
    }
    for (int si = 0; si < I; ++si) {
      const int k = so * I + si;
      const Where where{phase, layer, k};
      // The K/V of step k is here once: own (k = 0), the outer recv (round start), the inner recv.
      std::vector<OpId> have(static_cast<size_t>(cp));
      for (int c = 0; c < cp; ++c) have[size_t(c)] = si == 0 ? outer_arrived[size_t(c)] : kv_arrived[size_t(c)];
      if (si + 1 < I) {
        for (int c = 0; c < cp; ++c) {
          deps[size_t(c)] = start_deps(c);
          append(deps[size_t(c)], have[size_t(c)]);
          append(deps[size_t(c)], last_compute[size_t(c)]);
        }
        auto ids = shift(ctx, g, inner_next, &RankStreams::kv_inner, kv, where, kTagKvInner, deps);
        for (int c = 0; c < cp; ++c) kv_arrived[size_t(c)] = ids[size_t(c)].recv;
      }
      for (int c = 0; c < cp; ++c) {
        const int r = g.rank[size_t(c)];
        std::vector<OpId> cd = start_deps(c);
        append(cd, have[size_t(c)]);
        const sparsity::TileCost& t = work[size_t(c * cp + l.sources[size_t(k)][size_t(c)])];
        last_compute[size_t(c)] = ctx.b.compute(r, ctx.streams[size_t(r)].compute, attn, where,
                                                {double(t.nnz) * flops_per_nnz, t.blocks * batch,
                                                 ctx.work.tokens(c).size() * batch},
                                                std::move(cd));
      }
      if (backward && I > 1) {
        // The block's dK/dV follow it: this step's contribution, plus what came with it.
        for (int c = 0; c < cp; ++c) deps[size_t(c)] = {last_compute[size_t(c)]};
        auto ids = shift(ctx, g, inner_next, &RankStreams::dkv_inner, dkv, where, kTagDkvInner, deps);
        for (int c = 0; c < cp; ++c) dkv_inner_arrived[size_t(c)] = ids[size_t(c)].recv;
      }
    }
    if (backward && O > 1) {
      // The node's share of the block that entered here joins the sum from earlier nodes.
      for (int c = 0; c < cp; ++c) {
        deps[size_t(c)] = {last_compute[size_t(c)]};
        append(deps[size_t(c)], dkv_inner_arrived[size_t(c)]);
      }
      auto ids = shift(ctx, g, outer_next, &RankStreams::dkv_outer, dkv, {phase, layer, so * I + I - 1},
                       kTagDkvOuter, deps);
      for (int c = 0; c < cp; ++c) dkv_outer_arrived[size_t(c)] = ids[size_t(c)].recv;
    }
    outer_arrived = next_outer;
  }
  for (int c = 0; c < cp; ++c) {
    auto& done = ready[size_t(g.rank[size_t(c)])];
    done = {last_compute[size_t(c)]};
    if (backward) append(done, O > 1 ? dkv_outer_arrived[size_t(c)] : dkv_inner_arrived[size_t(c)]);
  }
}

}  // namespace

void emit_ring(StepContext& ctx, schedule::Phase phase, int layer, bool backward, RankDeps& ready) {
  for (int d = 0; d < ctx.e.parallel.dp; ++d)
    for (int h = 0; h < ctx.e.parallel.hp; ++h) emit_group(ctx, d, h, phase, layer, backward, ready);
}

}  // namespace rm::generate
