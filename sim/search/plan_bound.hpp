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
//                plus backward x kAttentionBwdFlopsRatio, each at the kernel
//                table's rate for the calls' query tokens (S/cp), causal or
//                not, whichever is faster; plus a kernel launch per ring step.
// The mask's FLOPs do not depend on the layout, so one simulated point of the
// experiment gives them to all (mask_fwd_flops_per_sequence). The planner
// skips every layout whose bound is above the K-th best time found (plan.hpp).
//
// A second floor, from the ring's transfers (ring_pass_floor): every ring step
// moves a K/V block (backward: and a dK/dV block) to the next rank on one of
// the rank's four ring streams (ring_emitter.hpp), a stream runs one op at a
// time, and a transfer takes at least its contention-free time (route latency
// + bytes over the route's slowest effective link; analytic.hpp). So the step
// lasts at least the busiest rank's busiest ring stream. More: a rank's
// receives of a pass run after the GEMMs that feed its attention (QKV) and
// before those that read its result, on that rank's dependency chain, so the
// GEMMs add to the transfers; the attention computes overlap them, so those
// two combine by max: floor = GEMMs + max(attention, ring transfers). The tests
// check it against simulated steps of every layout of two spaces.
#pragma once

#include "sim/config/experiment.hpp"
#include "sim/report/step_report.hpp"
#include "sim/topology/topology.hpp"

namespace rm::search {

// Forward attention FLOPs of the mask, per sequence, over the scope's layers,
// read off a StepReport of any layout of the experiment (its model FLOPs less
// the matmuls, over the convention's forward + backward factor).
double mask_fwd_flops_per_sequence(const Experiment& e, const report::StepReport& r);

struct ComputeFloor {
  double gemm_s = 0;       // the rank's GEMMs at peak x gemm_efficiency
  double attention_s = 0;  // its share of the attention at the kernel's best rates
  double comm_s = 0;       // the busiest ring stream (ring_comm_floor); 0 when not computed
  double compute_s() const { return gemm_s + attention_s; }
  double total() const { return gemm_s + (attention_s > comm_s ? attention_s : comm_s); }
};
// The GEMM FLOPs one rank of `e` runs in its scope (what the Schedule's gemm ops carry).
double rank_gemm_flops(const Experiment& e);
ComputeFloor compute_floor(const Experiment& e, double mask_fwd_flops_per_sequence);

// Per ring pass (one attention call's ring), the busiest rank's seconds on
// each ring stream at contention-free transfer times: kv_inner (I-1 transfers
// per inner round, O rounds), kv_outer (O-1), and in a backward pass dkv_inner
// (O*I, when I > 1) and dkv_outer (O, when O > 1), for a ring of O rounds of I
// steps (cp = O*I). Over the context groups of replica 0 (a subset of the ranks
// still bounds the step). All zero when cp = 1.
struct RingPassFloor {
  double kv_inner_s = 0, kv_outer_s = 0, dkv_inner_s = 0, dkv_outer_s = 0;
};
RingPassFloor ring_pass_floor(const Experiment& e, const topology::Topology& t);
// The key ring_pass_floor depends on (the factorisation, ring kind, window,
// placement and ring order): layouts that share it share the pass floor.
std::string ring_pass_key(const Experiment& e);
// The scope's ring passes (forward, full recomputation, backward) times the
// pass floor: the busiest ring stream over the whole scope.
double ring_comm_floor(const Experiment& e, const RingPassFloor& pass);

}  // namespace rm::search
