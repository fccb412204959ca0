// --emit internevo: an InternEvo (LoongTrain) config (InternLM/InternEvo,
// configs/*.py and doc/en/parallel.rst): the parallel dict with its 2D
// attention (sequence_2D: head_size, context_size, window_size, device
// placement), checkpointing (model.checkpoint, selective_checkpoint =
// LoongTrain's checkpoint++) and the data dict.
#include <fmt/format.h>

#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

namespace {

// The double-ring window that keeps each inner ring inside a node (head-first
// places a head group's hp ranks together): MTraining's hierarchical ring as
// LoongTrain spells it. 0 when no window fits.
int node_window(const Experiment& e) {
  const Parallel& p = e.parallel;
  const int per_node = e.cluster.gpus_per_node / (p.hp * p.tp);
  if (per_node < 1 || e.cluster.gpus_per_node % (p.hp * p.tp) != 0) return 0;
  const int w = std::min(per_node, p.cp);
  return w < p.cp && p.cp % w == 0 ? w : 0;
}

}  // namespace

Emission emit_internevo(const Experiment& e) {
  Nearest n(e, "internevo");
  Parallel& p = n.p;
  const bool sequence_2d = p.hp * p.cp > 1;
  if (p.tp > 1 && sequence_2d)
    n.refuse("its 2D attention runs under the isp tensor mode, which has no Megatron tensor parallelism (tp) beside "
             "it; plan with --set parallel.tp=1");
  if (p.cp > 1) {
    n.set(p.partition, Partition::zigzag, "partition", "LoongTrain's split is zigzag over 2 x hp x cp chunks");
    n.set(p.shuffle, ShuffleMode::once, "shuffle", "the zigzag order is made once, at data loading");
    n.set(p.ring_order, RingOrder::rank, "ring_order", "rings follow the context rank list");
    if (p.ring == RingKind::hierarchical) {
      const int w = node_window(e);
      if (w > 0) {
        n.set(p.window, w, "window", "the node-local inner ring of a hierarchical ring is a double-ring window");
        n.set(p.ring, RingKind::double_ring, "ring", "its hierarchical ring is the double ring with node-wide windows");
      } else {
        n.set(p.ring, RingKind::ring, "ring", "no double-ring window keeps an inner ring inside a node here");
      }
    }
  }
  n.set(p.zero_stage, std::min(p.zero_stage, 1), "zero_stage",
        "its hybrid ZeRO shards the optimizer state (zero1); weight parallelism is not mapped");
  Emission out = n.emission(Framework::internevo, e);
  const Parallel& r = out.runs.parallel;
  const Model& m = out.runs.model;
  std::string s = comment_header("#", "InternEvo (LoongTrain) config: parallel, checkpointing and data", out.runs,
                                 out.changes);
  s += fmt::format("# launch {} ranks; data parallel = {}\n", r.world(), r.dp);
  s += "parallel = dict(\n";
  s += fmt::format("    zero1=dict(size={}),\n", r.zero_stage >= 1 ? -1 : 1);
  if (sequence_2d)
    s += fmt::format("    tensor=dict(size={}, mode=\"isp\"),\n", r.hp * r.cp);
  else
    s += fmt::format("    tensor=dict(size={}, mode=\"{}\"),\n", r.tp, r.tp > 1 ? "msp" : "mtp");
  s += "    pipeline=dict(size=1, interleaved_overlap=True),\n";
  if (sequence_2d) {
    s += "    weight=dict(size=1, overlap=True, memory_pool=True),\n";
    s += "    sequence_2D=dict(\n";
    s += "        enable=True,\n";
    s += fmt::format("        head_size={},\n", r.hp);
    s += fmt::format("        context_size={},\n", r.cp);
    s += fmt::format("        window_size={},\n", r.ring == RingKind::double_ring ? r.window : 1);
    s += fmt::format("        device_placement_strategy=dict(head_first={}, interleaved={}),\n",
                     r.placement == PlacementOrder::head_first ? "True" : "False",
                     r.placement == PlacementOrder::interleaved ? "True" : "False");
    s += "    ),\n";
  }
  s += ")\n";
  s += fmt::format("selective_checkpoint = {}\n", r.checkpoint == Checkpoint::selective ? "True" : "False");
  s += "model = dict(\n";
  s += fmt::format("    checkpoint={},\n", r.checkpoint == Checkpoint::none ? "False" : "True");
  s += fmt::format("    num_layers={},\n", m.layers);
  s += fmt::format("    hidden_size={},\n", m.hidden);
  s += fmt::format("    num_attention_heads={},\n", m.heads);
  s += fmt::format("    num_kv_attention_heads={},\n", m.kv_heads);
  s += fmt::format("    mlp_ratio={},\n", double(m.intermediate) / double(m.hidden));
  s += fmt::format("    vocab_size={},\n", m.vocab);
  s += ")\n";
  s += fmt::format("data = dict(seq_len={}, micro_bsz=1, micro_num={})\n", out.runs.workload.seq_len,
                   out.runs.workload.batch);
  out.text = std::move(s);
  return out;
}

}  // namespace rm::frameworks
