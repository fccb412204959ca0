// --emit mtraining: MTraining (microsoft/MInference, folder mtraining/) as its
// released script runs it: train.py (nnscaler) flags from
// experiments/scripts/train_qwen_mini_ProLong512K.sh, and the keys its
// attention config (train_attn_configs/*.yaml) gives `--attn_type minfer`:
// implementation (default, stripe, zigzag, dr_stripe) and granularity.
#include <fmt/format.h>

#include "sim/frameworks/emitters.hpp"

namespace rm::frameworks {

Emission emit_mtraining(const Experiment& e) {
  Nearest n(e, "mtraining");
  Parallel& p = n.p;
  if (p.tp > 1) n.refuse("its scripts run no tensor parallelism; plan with --set parallel.tp=1");
  if (p.hp > 1) {
    n.set(p.cp, p.cp * p.hp, "cp", "no head parallelism: every sequence-parallel GPU joins the ring");
    n.set(p.hp, 1, "hp", "no head parallelism");
  }
  n.set(p.placement, PlacementOrder::head_first, "placement", "one ring: no head groups to place");
  std::string implementation = "default";
  if (p.cp > 1) {
    if (p.ring != RingKind::ring) {
      implementation = "dr_stripe";
      n.set(p.ring, RingKind::hierarchical, "ring", "its double ring (dr_stripe) is the node-local hierarchical ring");
    } else if (p.partition == Partition::zigzag && p.cp % 2 == 0) {
      implementation = "zigzag";
    } else {
      implementation = "stripe";
    }
    n.set(p.window, 1, "window", "no double-ring window");
    if (implementation == "zigzag") {
      n.set(p.ring_order, RingOrder::zigzag_pairs, "ring_order", "its zigzag ring visits 0, W-1, 1, W-2, ...");
    } else {
      n.set(p.partition, Partition::stripe, "partition", "its stripe rings stripe blocks of `granularity` tokens");
      n.set(p.ring_order, RingOrder::rank, "ring_order", "its stripe rings visit ranks in order");
    }
    n.set(p.shuffle, ShuffleMode::per_call, "shuffle", "it all-to-alls q, k, v into ring order inside every call");
    if (implementation == "dr_stripe")
      n.set(p.grad_comm_dtype, GradDtype::fp32, "grad_comm_dtype", "dK/dV travel in fp32 in its hierarchical ring");
    if (implementation == "stripe")
      n.set(p.grad_comm_dtype, GradDtype::bf16, "grad_comm_dtype", "dK/dV travel in bf16 in its flat stripe ring");
  }
  n.set(p.checkpoint, Checkpoint::full, "checkpoint", "its released script recomputes every decoder layer");
  n.set(p.zero_stage, 1, "zero_stage", "its released script runs ZeRO-1");
  Emission out = n.emission(Framework::mtraining, e);
  const Parallel& r = out.runs.parallel;
  const Workload& w = out.runs.workload;
  std::string s = comment_header("#", "MTraining train.py arguments, one per line, and its attention config", out.runs,
                                 out.changes);
  s += fmt::format("# torchrun {} ranks in all; one plan (model replica) rings over {}\n", r.world(), r.cp);
  s += fmt::format("--plan_ngpus {}\n", r.cp);
  s += fmt::format("--runtime_ngpus {}\n", r.world());
  s += fmt::format("--seq_len {}\n", w.seq_len);
  s += "--attn_type minfer\n";
  s += "--train_attn_config_path ATTN_CONFIG.yaml\n";
  s += fmt::format("--global_batch_size {}\n", int64_t(w.batch) * r.dp);
  s += fmt::format("--micro_batch_size {}\n", w.batch);
  s += "# ATTN_CONFIG.yaml (beside config_path, your vertical-slash pattern file):\n";
  s += fmt::format("#   implementation: {}\n", implementation);
  if (implementation == "stripe" || implementation == "dr_stripe")
    s += fmt::format("#   granularity: {}\n", r.stripe_tokens);
  out.text = std::move(s);
  return out;
}

}  // namespace rm::frameworks
