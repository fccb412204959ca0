// --emit megatron: pretrain_gpt.py arguments (NVIDIA/Megatron-LM,
// megatron/training/arguments.py). Megatron's context parallelism is
// TransformerEngine's: one flat ring (p2p), Ulysses (a2a), or both
// (a2a+p2p, with --hierarchical-context-parallel-sizes), over a zigzag split
// of each sequence into 2*CP chunks made at data loading.
#include <fmt/format.h>

#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

Nearest megatron_nearest(const Experiment& e, const std::string& framework) {
  Nearest n(e, framework);
  Parallel& p = n.p;
  if (p.hp * p.cp > 1) {  // its data loader splits over the whole context-parallel group, a2a included
    n.set(p.partition, Partition::zigzag, "partition",
          "the only split it has: 2*CP chunks, rank i holding chunks i and 2*CP-1-i");
    n.set(p.shuffle, ShuffleMode::once, "shuffle", "the zigzag order is made once, at data loading");
  }
  if (p.cp > 1) {
    n.set(p.ring, RingKind::ring, "ring", "cp_comm_type p2p is one flat ring; no double or hierarchical ring");
    n.set(p.window, 1, "window", "no double ring");
    n.set(p.ring_order, RingOrder::rank, "ring_order", "the ring visits context ranks in rank order");
  }
  if ((p.hp > 1 && p.cp > 1) || p.placement == PlacementOrder::interleaved)
    n.set(p.placement, PlacementOrder::head_first, "placement",
          "a2a+p2p puts the all-to-all (first hierarchical size) on consecutive ranks");
  n.set(p.checkpoint, p.checkpoint == Checkpoint::selective ? Checkpoint::full : p.checkpoint, "checkpoint",
        "no checkpoint++ (keep attention output and LSE); Megatron's selective recompute is the opposite");
  n.set(p.zero_stage, std::min(p.zero_stage, 1), "zero_stage",
        "--use-distributed-optimizer shards the optimizer state (ZeRO-1); Megatron FSDP is not mapped");
  return n;
}

namespace {

std::string cp_comm_type(const Parallel& p) {
  if (p.hp > 1 && p.cp > 1) return "a2a+p2p";
  return p.hp > 1 ? "a2a" : "p2p";
}

}  // namespace

Emission emit_megatron(const Experiment& e) {
  const Nearest n = megatron_nearest(e, "megatron");
  Emission out = n.emission(Framework::megatron, e);
  const Parallel& p = out.runs.parallel;
  const Model& m = out.runs.model;
  const Workload& w = out.runs.workload;
  std::string s = comment_header("#", "Megatron-LM pretrain_gpt.py arguments, one per line: $(grep -v '^#' FILE)",
                                 out.runs, out.changes);
  s += fmt::format("# launch {} ranks: data parallel = ranks / (tensor x context) = {}\n", p.world(), p.dp);
  auto arg = [&](const std::string& flag, const std::string& value = "") {
    s += value.empty() ? flag + "\n" : fmt::format("{} {}\n", flag, value);
  };
  arg("--num-layers", std::to_string(m.layers));
  arg("--hidden-size", std::to_string(m.hidden));
  arg("--ffn-hidden-size", std::to_string(m.intermediate));
  arg("--num-attention-heads", std::to_string(m.heads));
  if (m.kv_heads != m.heads) {
    arg("--group-query-attention");
    arg("--num-query-groups", std::to_string(m.kv_heads));
  }
  arg("--kv-channels", std::to_string(m.head_dim));
  arg("--vocab-size", std::to_string(m.vocab));
  arg("--swiglu");
  arg("--normalization", "RMSNorm");
  arg("--position-embedding-type", "rope");
  if (!m.tied_embeddings) arg("--untie-embeddings-and-output-weights");
  arg("--bf16");
  arg("--seq-length", std::to_string(w.seq_len));
  arg("--max-position-embeddings", std::to_string(w.seq_len));
  arg("--micro-batch-size", std::to_string(w.batch));
  arg("--global-batch-size", std::to_string(int64_t(w.batch) * p.dp));
  arg("--tensor-model-parallel-size", std::to_string(p.tp));
  if (p.tp > 1) arg("--sequence-parallel");
  arg("--context-parallel-size", std::to_string(p.hp * p.cp));
  if (p.hp * p.cp > 1) arg("--cp-comm-type", cp_comm_type(p));
  if (p.hp > 1 && p.cp > 1) arg("--hierarchical-context-parallel-sizes", fmt::format("{} {}", p.hp, p.cp));
  if (p.checkpoint == Checkpoint::full) {
    arg("--recompute-granularity", "full");
    arg("--recompute-method", "uniform");
    arg("--recompute-num-layers", "1");
  }
  if (p.zero_stage >= 1) arg("--use-distributed-optimizer");
  out.text = std::move(s);
  return out;
}

}  // namespace rm::frameworks
