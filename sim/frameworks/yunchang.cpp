// --emit yunchang: USP (feifeibear/long-context-attention, package yunchang):
// set_seq_parallel_pg(sp_ulysses_degree, sp_ring_degree, rank, world_size,
// use_ulysses_low) and LongContextAttention(ring_impl_type=...), whose ring
// implementations come from ring-flash-attention: "basic", "zigzag", "strip".
#include <fmt/format.h>

#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

namespace {

const char* ring_impl(Partition p) {
  switch (p) {
    case Partition::zigzag: return "zigzag";
    case Partition::stripe: return "strip";
    default: return "basic";
  }
}

}  // namespace

Emission emit_yunchang(const Experiment& e) {
  Nearest n(e, "yunchang");
  Parallel& p = n.p;
  if (p.tp > 1) n.refuse("it has no tensor parallelism; plan with --set parallel.tp=1");
  if (p.cp > 1) {
    n.set(p.partition, p.partition == Partition::balanced ? Partition::zigzag : p.partition, "partition",
          "no sparsity-aware partition; zigzag is its balanced one");
    if (p.partition == Partition::stripe)
      n.set(p.stripe_tokens, int64_t(1), "stripe_tokens", "ring-flash-attention's stripe ring stripes single tokens");
    n.set(p.shuffle, ShuffleMode::once, "shuffle", "the caller hands each rank its tokens already in ring order");
    n.set(p.ring, RingKind::ring, "ring", "LongContextAttention runs one flat ring");
    n.set(p.window, 1, "window", "no double ring");
    n.set(p.ring_order, RingOrder::rank, "ring_order", "the ring visits ranks in rank order");
  }
  if (p.placement == PlacementOrder::interleaved)
    n.set(p.placement, PlacementOrder::context_first, "placement", "no interleaved double-ring windows");
  Emission out = n.emission(Framework::yunchang, e);
  const Parallel& r = out.runs.parallel;
  std::string s = comment_header("#", "yunchang (USP) process groups and attention", out.runs, out.changes);
  s += fmt::format("# launch {} ranks; data parallel = world_size / (ulysses x ring) = {}\n", r.world(), r.dp);
  s += fmt::format("# activation checkpointing and ZeRO are your training loop's: ringmaster predicted ckpt={}, zero{}\n",
                   to_string(r.checkpoint), r.zero_stage);
  if (r.cp > 1 && r.partition != Partition::contiguous)
    s += fmt::format("# hand each rank its tokens in {} order (ring-flash-attention's test utilities show the split)\n",
                     to_string(r.partition));
  s += "from yunchang import LongContextAttention, set_seq_parallel_pg\n";
  s += fmt::format("set_seq_parallel_pg(sp_ulysses_degree={}, sp_ring_degree={}, rank=rank, world_size={}, "
                   "use_ulysses_low={})\n",
                   r.hp, r.cp, r.world(), r.placement == PlacementOrder::context_first && r.hp > 1 && r.cp > 1 ? "False" : "True");
  s += fmt::format("attention = LongContextAttention(ring_impl_type=\"{}\")\n", ring_impl(r.partition));
  out.text = std::move(s);
  return out;
}

}  // namespace rm::frameworks
