#include "sim/search/plan_bound.hpp"

#include <algorithm>

#include "sim/cost/attention_cost.hpp"
#include "sim/cost/model_flops.hpp"
#include "sim/generate/layer_costs.hpp"

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

namespace {
double best_tflops(const RateCurve& a, const RateCurve& b) {
  double best = 0;
  for (const RateCurve* c : {&a, &b})
    for (const RatePoint& p : *c) best = std::max(best, p.tflops);
  return best;
}
}  // namespace

ComputeFloor compute_floor(const Experiment& e, double mask_fwd_flops_per_sequence) {
  const Parallel& p = e.parallel;
  ComputeFloor f;
  const double gemm_rate = e.cluster.gpu.peak_tflops_bf16 * 1e12 * e.cluster.cost.gemm_efficiency;
  f.gemm_s = rank_gemm_flops(e) / gemm_rate;
  // The mean rank's attention: every sequence's mask over the hp*cp*tp ranks of its replica.
  const double fwd = mask_fwd_flops_per_sequence * e.workload.batch / (double(p.hp) * p.cp * p.tp);
  const double fwd_rate = best_tflops(e.kernel.fwd_full, e.kernel.fwd_causal) * 1e12;
  const double bwd_rate = best_tflops(e.kernel.bwd_full, e.kernel.bwd_causal) * 1e12;
  const bool backward = e.scope != Scope::attention_fwd;
  const bool recomputes = backward && e.scope != Scope::attention_fwd_bwd && p.checkpoint == Checkpoint::full;
  if (fwd_rate > 0) f.attention_s += fwd * (1.0 + (recomputes ? 1.0 : 0.0)) / fwd_rate;
  if (backward && bwd_rate > 0) f.attention_s += fwd * cost::kAttentionBwdFlopsRatio / bwd_rate;
  return f;
}

}  // namespace rm::search
