#include "sim/search/plan_bound.hpp"

#include <algorithm>

#include "sim/cost/attention_cost.hpp"
#include "sim/cost/model_flops.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/placement/attention_kind.hpp"
#include "sim/placement/device_map.hpp"

#include <fmt/format.h>

namespace rm::search {

double mask_fwd_flops_per_sequence(const Experiment& e, const report::StepReport& r) {
  const double matmuls = cost::model_flops(e, 0).dense;
  const double convention = e.scope == Scope::attention_fwd ? 1.0 : 3.0;  // model_flops: fwd + 2x bwd
  const double sequences = double(e.parallel.dp) * e.workload.batch;
  return std::max(0.0, (r.model_flops - matmuls) / convention / sequences);
}

double rank_gemm_flops(const Experiment& e) {
  const Model& m = e.model;
  const Parallel& p = e.parallel;
  if (e.scope == Scope::attention_fwd || e.scope == Scope::attention_fwd_bwd) return 0;
  // Every GEMM sees the rank's local tokens (with tp > 1 all-gathered) and 1/tp of the weights.
  const int64_t tokens = e.workload.seq_len / (int64_t(p.cp) * p.hp) * e.workload.batch;
  const double fwd = generate::gemm_flops(tokens, cost::matmul_params_per_layer(m), 1) / p.tp;
  const double recompute = p.checkpoint == Checkpoint::none ? 0.0 : 1.0;
  const double per_layer = fwd * (1.0 + recompute + generate::kGemmBwdFlopsRatio);
  if (e.scope == Scope::layer) return per_layer;
  const double lm_head =
      generate::gemm_flops(tokens, generate::tp_vocab(m, p.tp), m.hidden) * (1.0 + generate::kGemmBwdFlopsRatio);
  return m.layers * per_layer + lm_head;
}

ComputeFloor compute_floor(const Experiment& e, double mask_fwd_flops_per_sequence) {
  const Parallel& p = e.parallel;
  ComputeFloor f;
  const double gemm_rate = e.cluster.gpu.peak_tflops_bf16 * 1e12 * e.cluster.cost.gemm_efficiency;
  f.gemm_s = rank_gemm_flops(e) / gemm_rate;
  // The mean rank's attention: every sequence's mask over the hp*cp*tp ranks of its replica.
  const double fwd = mask_fwd_flops_per_sequence * e.workload.batch / (double(p.hp) * p.cp * p.tp);
  // Every call of the ring has the rank's S/cp query tokens (the whole sequence
  // without a ring): the kernel table's rate at that size, causal or not,
  // whichever is faster (cost_model.hpp: attention_tflops keys on a call's query tokens).
  const cost::CostModel cm = cost::CostModel::for_experiment(e);
  const double call_tokens = double(e.workload.seq_len / p.cp);
  auto rate = [&](bool bwd) {
    return std::max(cm.attention_tflops(bwd, true, call_tokens), cm.attention_tflops(bwd, false, call_tokens)) * 1e12;
  };
  const double fwd_rate = rate(false), bwd_rate = rate(true);
  const bool backward = e.scope != Scope::attention_fwd;
  const bool recomputes = backward && e.scope != Scope::attention_fwd_bwd && p.checkpoint == Checkpoint::full;
  if (fwd_rate > 0) f.attention_s += fwd * (1.0 + (recomputes ? 1.0 : 0.0)) / fwd_rate;
  if (backward && bwd_rate > 0) f.attention_s += fwd * cost::kAttentionBwdFlopsRatio / bwd_rate;
  // One attention call per ring step (cp per pass), each with its kernel launch.
  const int layers = e.scope == Scope::step ? e.model.layers : 1;
  const double passes = double(layers) * (1 + (recomputes ? 1 : 0) + (backward ? 1 : 0));
  f.attention_s += passes * p.cp * e.cluster.cost.kernel_launch_us * 1e-6;
  return f;
}

RingPassFloor ring_pass_floor(const Experiment& e, const topology::Topology& t) {
  const Parallel& p = e.parallel;
  RingPassFloor f;
  if (p.cp < 2) return f;
  const cost::CostModel cm = cost::CostModel::for_experiment(e);
  const placement::DeviceMap map(p);
  const auto kind = placement::make_attention_kind(e);
  const int batch = e.workload.batch, dim = e.model.head_dim;
  const int64_t ctx_tokens = e.workload.seq_len / p.cp;
  auto seconds = [&](int a, int b, double bytes) {
    return cost::CostModel::transfer_seconds(cm.route_cost(t, t.compute_route(a, b)), bytes);
  };
  for (int h = 0; h < p.hp; ++h)
    for (int tr = 0; tr < p.tp; ++tr) {
      // What ring_emitter.cpp's emit_group sends, with the same messages.
      const placement::HeadShard shard = placement::head_shard(e.model, p, h, tr);
      const double kv = double(generate::kv_message_bytes(ctx_tokens, shard.kv_heads, dim, batch));
      const double dkv =
          double(generate::dkv_message_bytes(ctx_tokens, shard.kv_heads, dim, batch, p.grad_comm_dtype));
      const std::vector<int> gpus = map.context_group(0, h, tr);
      const placement::RingLayout l = kind->layout(gpus, t);
      const int O = l.outer(), I = l.inner();
      for (int o = 0; o < O; ++o)
        for (int i = 0; i < I; ++i) {
          const int g = gpus[size_t(l.rings[size_t(o)][size_t(i)])];
          if (I > 1) {
            const int next = gpus[size_t(l.rings[size_t(o)][size_t((i + 1) % I)])];
            f.kv_inner_s = std::max(f.kv_inner_s, double(O) * (I - 1) * seconds(g, next, kv));
            f.dkv_inner_s = std::max(f.dkv_inner_s, double(O) * I * seconds(g, next, dkv));
          }
          if (O > 1) {
            const int next = gpus[size_t(l.rings[size_t((o + 1) % O)][size_t(i)])];
            f.kv_outer_s = std::max(f.kv_outer_s, double(O - 1) * seconds(g, next, kv));
            f.dkv_outer_s = std::max(f.dkv_outer_s, double(O) * seconds(g, next, dkv));
          }
        }
    }
  return f;
}

std::string ring_pass_key(const Experiment& e) {
  const Parallel& p = e.parallel;
  return fmt::format("{} {} {} {} {} {} {} {}", p.dp, p.tp, p.hp, p.cp, to_string(p.ring), p.window,
                     to_string(p.placement), to_string(p.ring_order));
}

double ring_comm_floor(const Experiment& e, const RingPassFloor& f) {
  // Ring passes of the scope, as generate_step emits them: a forward per layer,
  // the recomputation's forward under checkpoint full (scopes layer and step),
  // and a backward per layer (every scope but attention_fwd).
  const int layers = e.scope == Scope::step ? e.model.layers : 1;
  const bool backward = e.scope != Scope::attention_fwd;
  const bool recomputes = (e.scope == Scope::layer || e.scope == Scope::step) && e.parallel.checkpoint == Checkpoint::full;
  const double kv_passes = double(layers) * (1 + (recomputes ? 1 : 0) + (backward ? 1 : 0));
  const double bwd_passes = backward ? double(layers) : 0.0;
  return std::max({kv_passes * f.kv_inner_s, kv_passes * f.kv_outer_s, bwd_passes * f.dkv_inner_s,
                   bwd_passes * f.dkv_outer_s});
}

}  // namespace rm::search
