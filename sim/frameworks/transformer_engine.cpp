// --emit te: the TransformerEngine attention settings of the layout
// (NVIDIA/TransformerEngine, transformer_engine/pytorch/attention:
// DotProductAttention(...) and its set_context_parallel_group(cp_group,
// cp_global_ranks, cp_stream, cp_comm_type)). TE spells the all-gather type
// "all_gather" where Megatron's flag says "allgather"; ringmaster emits
// neither (it does not model all-gather context parallelism).
#include <fmt/format.h>

#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

Emission emit_te(const Experiment& e) {
  const Nearest n = megatron_nearest(e, "te");
  Emission out = n.emission(Framework::te, e);
  const Parallel& p = out.runs.parallel;
  const Model& m = out.runs.model;
  std::string s = comment_header("#", "TransformerEngine (transformer_engine.pytorch) attention settings", out.runs,
                                 out.changes);
  const bool two_level = p.hp > 1 && p.cp > 1;
  const std::string comm = two_level ? "a2a+p2p" : p.hp > 1 ? "a2a" : "p2p";
  s += "# cp_group: the context-parallel process group of this rank";
  if (two_level)
    s += fmt::format(", given as [a2a_group, p2p_group]: the {} consecutive ranks of its all-to-all, then the {} ranks "
                     "of its ring\n", p.hp, p.cp);
  else
    s += fmt::format(" ({} ranks)\n", p.hp * p.cp);
  s += "# cp_global_ranks: the global ranks of the p2p group, in ring order; cp_stream: a second CUDA stream\n";
  s += "# the sequence is split into 2 x context-parallel-size chunks, rank i holding chunks i and 2CP-1-i\n";
  s += "attention = transformer_engine.pytorch.DotProductAttention(\n";
  s += fmt::format("    num_attention_heads={},\n", m.heads);
  s += fmt::format("    kv_channels={},\n", m.head_dim);
  s += fmt::format("    num_gqa_groups={},\n", m.kv_heads);
  s += "    attn_mask_type=\"causal\",\n";
  s += "    qkv_format=\"sbhd\",\n";
  if (p.tp > 1) {
    s += fmt::format("    tp_size={},\n", p.tp);
    s += "    tp_group=tp_group,\n";
    s += "    sequence_parallel=True,\n";
  }
  if (p.hp * p.cp > 1) {
    s += "    cp_group=cp_group,\n";
    s += "    cp_global_ranks=cp_global_ranks,\n";
    s += "    cp_stream=cp_stream,\n";
    s += fmt::format("    cp_comm_type=\"{}\",\n", comm);
  }
  s += ")\n";
  if (p.hp * p.cp > 1)
    s += fmt::format("# or, on a module built without them: attention.set_context_parallel_group(cp_group, "
                     "cp_global_ranks, cp_stream, cp_comm_type=\"{}\")\n", comm);
  out.text = std::move(s);
  return out;
}

}  // namespace rm::frameworks
