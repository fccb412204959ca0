// A lower bound on a layout's step time that needs no Schedule: the compute
// one rank must do, at rates no op can beat. Every compute op of a rank runs
// on its one compute stream (step_context.hpp), so the step lasts at least the
// sum of that rank's compute op times; each op takes at least its work over
// the cost model's best rate (cost_model.hpp: launch + max(work/rate, bytes/HBM)):
//   GEMMs        6 x matmul weights x local tokens (forward 2, backward 4) plus
//                the forward again when the checkpoint policy recomputes, and
//                the LM head in a full step, at peak x gemm_efficiency;
//   attention    the mean rank's share of the mask's FLOPs (the busiest rank
//                does at least the mean): forward x (1 + full recomputation)
//                plus backward x kAttentionBwdFlopsRatio, each at the fastest
//                rate anywhere in the kernel's table for its direction.
// The mask's FLOPs do not depend on the layout, so one simulated point of the
// experiment gives them to all (mask_fwd_flops_per_sequence). The planner
// skips every layout whose bound is above the K-th best time found (plan.hpp).
#pragma once

#include "sim/config/experiment.hpp"
#include "sim/report/step_report.hpp"

namespace rm::search {

// Forward attention FLOPs of the mask, per sequence, over the scope's layers,
// read off a StepReport of any layout of the experiment (its model FLOPs less
// the matmuls, over the convention's forward + backward factor).
double mask_fwd_flops_per_sequence(const Experiment& e, const report::StepReport& r);

struct ComputeFloor {
  double gemm_s = 0;       // the rank's GEMMs at peak x gemm_efficiency
  double attention_s = 0;  // its share of the attention at the kernel's best rates
  double total() const { return gemm_s + attention_s; }
};
// The GEMM FLOPs one rank of `e` runs in its scope (what the Schedule's gemm ops carry).
double rank_gemm_flops(const Experiment& e);
ComputeFloor compute_floor(const Experiment& e, double mask_fwd_flops_per_sequence);

}  // namespace rm::search
