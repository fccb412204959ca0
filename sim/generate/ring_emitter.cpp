#include "sim/generate/ring_emitter.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "sim/generate/attention.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::generate {

using schedule::BufferRole;
using schedule::DType;
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

// Context rank c's tokens as the ring sees them (token-set id, first and last
// token, count), made on first use and kept for every later layer and pass.
const BufferMemo::Tokens& tokens_of(StepContext& ctx, int c) {
  auto& memo = ctx.memo.tokens;
  if (memo.size() < size_t(ctx.work.cp())) memo.resize(size_t(ctx.work.cp()));
  BufferMemo::Tokens& m = memo[size_t(c)];
  if (m.set >= 0) return m;
  const sparsity::TokenSet& t = ctx.work.tokens(c);
  schedule::TokenSet out;
  for (const auto& r : t.runs) out.runs.push_back({r.begin, r.len, r.stride, r.count});
  m.set = ctx.b.token_set(out);
  m.lo = INT64_MAX;
  m.hi = -1;
  for (const auto& r : t.runs) {
    m.lo = std::min(m.lo, r.begin);
    m.hi = std::max(m.hi, r.begin + (r.count - 1) * r.stride + r.len - 1);
  }
  m.size = t.size();
  return m;
}

// How the causal mask meets queries q x keys k (full attention: never).
schedule::Mask mask_of(const BufferMemo::Tokens& q, const BufferMemo::Tokens& k, bool causal) {
  if (!causal) return schedule::Mask::full;
  if (k.hi <= q.lo) return schedule::Mask::full;
  if (k.lo > q.hi) return schedule::Mask::empty;
  return schedule::Mask::causal;
}

// Buffers one stream writes and another reads are safe from the next writer
// only through what the generator's dependencies imply: an outer K|V slot is
// read by an inner send that nothing waits for, so the slots are three (a
// slot is rewritten once a later round's computes, hence the inner sends
// before them, are done) and kept per pass (two copies, alternating between
// consecutive passes), as are the dK|dV partials and round sums.
// (RingBuffers: buffer_ids.hpp; O and I are the rank's group's, hence fixed per rank.)
const RingBuffers& ring_buffers(StepContext& ctx, int r, schedule::Phase phase, int O, int I, bool backward) {
  auto& memo = ctx.memo.ring[size_t(r)][size_t(phase) * 2 + (backward ? 1 : 0)];
  if (memo) return *memo;
  RingBuffers b;
  b.t = attention_tensors(ctx, r, phase);
  const std::vector<int64_t> kv = ctx.b.peek().buffers[size_t(b.t.kv)].shape;
  auto slot = [&](const std::string& name, BufferRole role, DType dt,
                  schedule::Instances n = schedule::Instances::one) { return ctx.buffer(r, name, role, dt, kv, n); };
  constexpr auto kPerPass = schedule::Instances::per_pass;
  const DType g = grad_dtype(ctx.e);
  for (int i = 0; i < std::min(3, O - 1); ++i)
    b.kv_outer[i] = slot(fmt::format("kv.outer{}", i), BufferRole::kv_slot, DType::bf16, kPerPass);
  for (int i = 0; i < 2; ++i) {
    if (I > 1) b.kv_inner[i] = slot(fmt::format("kv.inner{}", i), BufferRole::kv_slot, DType::bf16);
    if (backward && I > 1) b.dkv_inner[i] = slot(fmt::format("dkv.inner{}", i), BufferRole::dkv_slot, g);
    if (backward && O > 1) b.dkv_outer[i] = slot(fmt::format("dkv.outer{}", i), BufferRole::dkv_slot, g);
  }
  if (backward && O * I > 1)
    for (int k = 0; k < O * I; ++k)
      b.dkv_part.push_back(slot(fmt::format("dkv.step{}", k), BufferRole::dkv_slot, g, kPerPass));
  if (backward && O > 1 && I > 1)
    for (int o = 0; o < O; ++o)
      b.dkv_round.push_back(slot(fmt::format("dkv.round{}", o), BufferRole::dkv_slot, g, kPerPass));
  memo = std::move(b);
  return *memo;
}

// The merge of step k's result into the rank's accumulators, after its attention op
// (k > 0), as memory traffic (layer_costs.hpp): forward O and LSE; backward dQ and
// the step's dK|dV partial (`part`) with, when a dK|dV sum came with the block
// (`arrived`, from the recv `arrived_op`), that sum — the compute stream waits for
// that transfer here, as MTraining's ring does before `dk += step_dk`.
// The sum itself is what the next dK|dV send carries (it adds its reads).
OpId emit_merge(StepContext& ctx, int r, const RingBuffers& b, schedule::Where where, bool backward, OpId arrived_op,
                int arrived, int part, OpId attention) {
  const Experiment& e = ctx.e;
  const placement::HeadShard s = ctx.heads_of(r);
  const int64_t T = e.workload.seq_len / e.parallel.cp;
  const int D = e.model.head_dim, B = e.workload.batch;
  const int64_t bytes = backward ? merge_bwd_bytes(T, s.heads, s.kv_heads, D, B, arrived >= 0, e.parallel.grad_comm_dtype)
                                 : merge_fwd_bytes(T, s.heads, D, B, merges_in_kernel(e.kernel));
  std::vector<OpId> deps{attention};
  append(deps, arrived_op);
  const OpId id = ctx.b.compute(r, ctx.streams[size_t(r)].compute, OpKind::elementwise, where, {0.0, 0, T * B, bytes},
                                std::move(deps));
  if (!backward) {
    ctx.access(id, {b.t.o, b.t.lse}, {b.t.o, b.t.lse});
  } else {
    std::vector<int> reads{b.t.dq, part};
    if (arrived >= 0) reads.push_back(arrived);
    ctx.access(id, std::move(reads), {b.t.dq});
  }
  return id;
}

// A two-level ring's outer dK|dV addition at the end of round so > 0 on rank c's
// compute stream, once the round's sum (`round`) and the one from earlier nodes
// (`arrived`, its recv `arrived_op`) are here. A cost op: the outer send that follows
// carries the sum (it adds its reads), so this writes nothing.
OpId emit_outer_add(StepContext& ctx, int r, schedule::Where where, std::vector<OpId> deps, int round, int arrived) {
  const Experiment& e = ctx.e;
  const placement::HeadShard s = ctx.heads_of(r);
  const int64_t T = e.workload.seq_len / e.parallel.cp;
  const int64_t bytes =
      outer_dkv_add_bytes(T, s.kv_heads, e.model.head_dim, e.workload.batch, e.parallel.grad_comm_dtype);
  const OpId id = ctx.b.compute(r, ctx.streams[size_t(r)].compute, OpKind::elementwise, where,
                                {0.0, 0, T * e.workload.batch, bytes}, std::move(deps));
  ctx.access(id, {round, arrived}, {});
  return id;
}

int inner_next(const Ring& g, int c) { return g.at(g.pos[size_t(c)].first, g.pos[size_t(c)].second + 1); }
int outer_next(const Ring& g, int c) { return g.at(g.pos[size_t(c)].first + 1, g.pos[size_t(c)].second); }

void emit_group(StepContext& ctx, int d, int h, int tr, schedule::Phase phase, int layer, bool backward, RankDeps& ready) {
  const Experiment& e = ctx.e;
  const RingLayout& l = ctx.layout(d, h, tr);
  const int cp = e.parallel.cp, O = l.outer(), I = l.inner();
  Ring g;
  g.l = &l;
  g.rank.resize(static_cast<size_t>(cp));
  g.pos.resize(static_cast<size_t>(cp));
  for (int c = 0; c < cp; ++c) g.rank[size_t(c)] = ctx.rank(d, h, c, tr);
  for (int o = 0; o < O; ++o)
    for (int i = 0; i < I; ++i) g.pos[size_t(l.rings[size_t(o)][size_t(i)])] = {o, i};

  const placement::HeadShard shard = placement::head_shard(e.model, e.parallel, h, tr);
  const int batch = e.workload.batch, dim = e.model.head_dim;
  const int64_t ctx_tokens = e.workload.seq_len / cp;
  const int64_t kv = kv_message_bytes(ctx_tokens, shard.kv_heads, dim, batch);
  const int64_t dkv = dkv_message_bytes(ctx_tokens, shard.kv_heads, dim, batch, e.parallel.grad_comm_dtype);
  const auto& work = ctx.work.pairs(layer, tr * e.parallel.hp + h);  // tr: the tensor rank
  const OpKind attn = backward ? OpKind::attn_bwd : OpKind::attn_fwd;
  const schedule::IndexSource index = ctx.patterns_dynamic ? schedule::IndexSource::built
                                      : ctx.patterns_sparse ? schedule::IndexSource::pattern
                                                            : schedule::IndexSource::none;
  std::vector<const RingBuffers*> bufp;
  std::vector<const BufferMemo::Tokens*> tok;
  for (int c = 0; c < cp; ++c) {
    bufp.push_back(&ring_buffers(ctx, g.rank[size_t(c)], phase, O, I, backward));
    tok.push_back(&tokens_of(ctx, c));
  }
  // buf[c]: rank c's ring buffers (the memo's entries stay put: one optional per rank and pass).
  struct Buffers {
    const std::vector<const RingBuffers*>& p;
    const RingBuffers& operator[](size_t c) const { return *p[c]; }
  } buf{bufp};
  // Where rank c holds the K|V of step (so, si): its own, the outer slot, or an inner slot.
  auto block = [&](int c, int so, int si) {
    const RingBuffers& b = buf[size_t(c)];
    if (si > 0) return b.kv_inner[(so * I + si - 1) % 2];
    return so == 0 ? b.t.kv : b.kv_outer[(so - 1) % 3];
  };
  auto set_shift = [&](const std::vector<P2PIds>& ids, auto reads, auto writes) {
    for (int c = 0; c < cp; ++c) {
      ctx.access(ids[size_t(c)].send, reads(c), {});
      ctx.access(ids[size_t(c)].recv, {}, {writes(c)});
    }
  };

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
      set_shift(
          ids, [&](int c) { return std::vector<int>{block(c, so, 0)}; },
          [&](int c) { return buf[size_t(c)].kv_outer[so % 3]; });
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
        set_shift(
            ids, [&](int c) { return std::vector<int>{block(c, so, si)}; },
            [&](int c) { return buf[size_t(c)].kv_inner[k % 2]; });
      }
      for (int c = 0; c < cp; ++c) {
        const int r = g.rank[size_t(c)];
        std::vector<OpId> cd = start_deps(c);
        append(cd, have[size_t(c)]);
        const int src = l.sources[size_t(k)][size_t(c)];
        const sparsity::TileCost& t = work[size_t(c * cp + src)];
        last_compute[size_t(c)] = ctx.b.compute(r, ctx.streams[size_t(r)].compute, attn, where,
                                                {cost::attention_flops(t.nnz, dim, batch, backward), t.blocks * batch,
                                                 tok[size_t(c)]->size * batch},
                                                std::move(cd));
        const RingBuffers& b = buf[size_t(c)];
        std::vector<int> reads{b.t.q, block(c, so, si)};
        if (backward) reads.insert(reads.end(), {b.t.o, b.t.lse, b.t.d_o});
        if (index == schedule::IndexSource::built) reads.insert(reads.end(), {b.t.index, b.t.index_bars});
        std::vector<int> writes = !backward ? std::vector<int>{b.t.o, b.t.lse}
                                            : std::vector<int>{b.t.dq, O * I > 1 ? b.dkv_part[size_t(k)] : b.t.dkv};
        ctx.access(last_compute[size_t(c)], std::move(reads), std::move(writes));
        ctx.b.set_attention(last_compute[size_t(c)],
                            {tok[size_t(c)]->set, tok[size_t(src)]->set, shard.first_head, shard.heads,
                             shard.first_kv_head, shard.kv_heads, mask_of(*tok[size_t(c)], *tok[size_t(src)], ctx.patterns_causal),
                             index, k > 0});
        if (k > 0) {
          const bool sum = backward && si > 0;  // a dK|dV sum came with this block
          last_compute[size_t(c)] =
              emit_merge(ctx, r, b, where, backward, sum ? dkv_inner_arrived[size_t(c)] : -1,
                         sum ? b.dkv_inner[(k - 1) % 2] : -1, backward ? b.dkv_part[size_t(k)] : -1,
                         last_compute[size_t(c)]);
        }
      }
      if (backward && I > 1) {
        // The block's dK/dV follow it: this step's contribution, plus what came with it.
        for (int c = 0; c < cp; ++c) deps[size_t(c)] = {last_compute[size_t(c)]};
        auto ids = shift(ctx, g, inner_next, &RankStreams::dkv_inner, dkv, where, kTagDkvInner, deps);
        for (int c = 0; c < cp; ++c) dkv_inner_arrived[size_t(c)] = ids[size_t(c)].recv;
        // The send adds this step's partial to the sum that came with the block; the
        // round's last transfer hands the node's sum to the outer ring (or, with one
        // round, brings the rank its own dK|dV).
        set_shift(
            ids,
            [&](int c) {
              std::vector<int> r{buf[size_t(c)].dkv_part[size_t(k)]};
              if (si > 0) r.push_back(buf[size_t(c)].dkv_inner[(k - 1) % 2]);
              return r;
            },
            [&](int c) {
              const RingBuffers& b = buf[size_t(c)];
              if (si + 1 < I) return b.dkv_inner[k % 2];
              return O > 1 ? b.dkv_round[size_t(so)] : b.t.dkv;
            });
      }
      ctx.cut_ring_step();
    }
    if (backward && O > 1) {
      // The node's share of the block that entered here joins the sum from earlier
      // nodes: added on the compute stream once both are here (rounds after the first).
      auto round_sum = [&](int c) {
        const RingBuffers& b = buf[size_t(c)];
        return I > 1 ? b.dkv_round[size_t(so)] : b.dkv_part[size_t(so * I + I - 1)];
      };
      for (int c = 0; c < cp; ++c) {
        deps[size_t(c)] = {last_compute[size_t(c)]};
        append(deps[size_t(c)], dkv_inner_arrived[size_t(c)]);
        if (so > 0) {
          append(deps[size_t(c)], dkv_outer_arrived[size_t(c)]);
          last_compute[size_t(c)] = emit_outer_add(ctx, g.rank[size_t(c)], {phase, layer, so * I + I - 1},
                                                   deps[size_t(c)], round_sum(c), buf[size_t(c)].dkv_outer[(so - 1) % 2]);
          deps[size_t(c)] = {last_compute[size_t(c)]};
        }
      }
      auto ids = shift(ctx, g, outer_next, &RankStreams::dkv_outer, dkv, {phase, layer, so * I + I - 1},
                       kTagDkvOuter, deps);
      for (int c = 0; c < cp; ++c) dkv_outer_arrived[size_t(c)] = ids[size_t(c)].recv;
      set_shift(
          ids,
          [&](int c) {
            std::vector<int> r{round_sum(c)};
            if (so > 0) r.push_back(buf[size_t(c)].dkv_outer[(so - 1) % 2]);
            return r;
          },
          [&](int c) { return so + 1 < O ? buf[size_t(c)].dkv_outer[so % 2] : buf[size_t(c)].t.dkv; });
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
  for (int d = 0; d < ctx.sim_dp; ++d)
    for (int h = 0; h < ctx.e.parallel.hp; ++h)
      for (int t = 0; t < ctx.e.parallel.tp; ++t) emit_group(ctx, d, h, t, phase, layer, backward, ready);
}

}  // namespace rm::generate
