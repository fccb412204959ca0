// The cost model: how long an op takes on the cluster, before any contention.
// Compute ops: a roofline of FLOPs over the device's per-kind rate and bytes
// over HBM, plus a kernel launch. Communication: per-link rates (bandwidth x
// the link class's protocol efficiency) and latencies, so engines can share
// links between flows. Collectives: decomposed as NCCL does into point-to-point
// transfer stages (ring, pairwise, pipelined ring) that engines run over the
// Topology's routes. Formulas and their NCCL reasoning: docs/cost-model.md.
// Every parameter comes from the cluster JSON (CostSpec, GpuSpec) and the
// attention kernel's table (AttentionKernel, configs/kernels/).
#pragma once

#include <cstdint>

#include "sim/config/attention_kernel.hpp"
#include "sim/config/cluster.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"

namespace rm::cost {

// Attention tile shape: turns `blocks` into the FLOPs a tile kernel performs.
// Must match the experiment's workload.block_q/block_k and the model's head_dim.
struct TileShape {
  int64_t bq = 128;
  int64_t bk = 64;
  int head_dim = 128;
};

// One attention kernel call, as the kernel table prices it.
struct AttentionCall {
  double flops = 0;      // FLOPs of the pairs the mask allows (batch included)
  double blocks = 0;     // Bq x Bk tiles the kernel executes (batch included); 0 when not tiled
  bool backward = false;
  bool causal = true;    // the kernel runs with its causal mask (the diagonal call); false: full
  double tokens = 0;     // query tokens of one sequence in the call: the table's size key
  bool causal_mask = false;  // the call's mask is causal (its descriptor says so), diagonal or not
};

class CostModel {
 public:
  CostModel(const Cluster& c, AttentionKernel kernel, TileShape tile = {});
  // The cost model of an experiment: its cluster, its attention kernel, its tile and head dim.
  static CostModel for_experiment(const Experiment& e) {
    return CostModel(e.cluster, e.kernel, TileShape{e.workload.block_q, e.workload.block_k, e.model.head_dim});
  }

  // Seconds a compute op of `s` runs alone on its stream:
  //   launch + max(work / rate, bytes / (HBM x elementwise_efficiency)).
  // Attention ops: work and rate from attention_seconds, the call read off the
  // op's descriptor (attention_call). gemm, elementwise and index_build: work =
  // flops at peak x gemm_efficiency (elementwise ops' bytes normally dominate).
  double compute_seconds(const schedule::Schedule& s, const schedule::Op& op) const {
    return compute_seconds(s, op, s.desc(op));
  }
  // The same with the op's entry given (a streamed chunk keeps its own).
  double compute_seconds(const schedule::Schedule& s, const schedule::Op& op, const schedule::OpDesc& d) const;

  // The call an attention op makes: flops and blocks from the op; tokens = its
  // query token set's size; causal when the causal mask cuts it and its queries
  // and keys are the same tokens (a ring's diagonal step). Every other ring step
  // sees whole tiles allowed or masked, and ring implementations call the kernel
  // without its causal flag there (ring-flash-attention's zigzag, MTraining's
  // stripe ring: causal only at step 0). Without a descriptor: causal, op.tokens.
  // attention_seconds adds one case: a dense kernel (fa2, fa3) whose causal
  // mask cuts its tiles off the diagonal (stripes narrower than a tile) runs
  // causal, as ring-flash-attention's stripe calls the causal kernel on shifted
  // slices at every step.
  static AttentionCall attention_call(const schedule::Schedule& s, const schedule::Op& op) {
    return attention_call(s, op, s.desc(op));
  }
  static AttentionCall attention_call(const schedule::Schedule& s, const schedule::Op& op, const schedule::OpDesc& d);

  // Seconds of one attention call: launch + work / (attention_tflops x 1e12), where
  // work = flops for kernels whose rates count allowed pairs (fa2, fa3), and
  // max(flops, blocks x tile FLOPs) for kernels that count executed tiles
  // (block_sparse). What `ringmaster imbalance` charges a ring step, so that it
  // and `simulate` share one attention-seconds path.
  double attention_seconds(const AttentionCall& a) const;
  // The kernel table's rate (TFLOP/s) for a direction, mask and tokens per call
  // (kernel_rate.hpp: linear in log tokens, clamped at the ends).
  double attention_tflops(bool backward, bool causal, double tokens) const;
  const AttentionKernel& kernel() const { return kernel_; }

  // Effective bytes/s of a link: bandwidth x its class's efficiency.
  double link_rate_Bps(const topology::Link& l) const;
  double link_latency_s(const topology::Link& l) const { return l.latency_us * 1e-6; }
  // Bytes/s of a transfer between two ranks on the same GPU (a device copy
  // that reads and writes every byte): HBM x elementwise_efficiency / 2.
  double local_copy_rate_Bps() const { return local_rate_; }

  // What one route costs a transfer alone on it: the latency summed over its
  // links and the slowest effective link's rate (an empty route: the local copy, no latency).
  struct RouteCost {
    double latency_s = 0;
    double rate_Bps = 0;
  };
  RouteCost route_cost(const topology::Topology& t, int src_gpu, int dst_gpu) const {
    return route_cost(t, t.route(src_gpu, dst_gpu));
  }
  // The same for a route given by link ids into t.links() (calibration prices
  // routes found on another Topology of the same shape, whose link ids agree).
  RouteCost route_cost(const topology::Topology& t, const topology::Route& r) const;
  // Contention-free time of one transfer: route latency + bytes over the
  // slowest effective link of the route (local copy when the route is empty).
  double transfer_seconds(const topology::Topology& t, int src_gpu, int dst_gpu, double bytes) const;
  static double transfer_seconds(const RouteCost& c, double bytes) { return c.latency_s + bytes / c.rate_Bps; }

  const Cluster& cluster() const { return c_; }

 private:
  double attention_work_seconds(const AttentionCall& a) const;  // attention_seconds without the launch
  Cluster c_;
  AttentionKernel kernel_;
  TileShape tile_;
  double local_rate_ = 0;
};

}  // namespace rm::cost
