// The cost model: how long an op takes on the cluster, before any contention.
// Compute ops: a roofline of FLOPs over the device's per-kind rate and bytes
// over HBM, plus a kernel launch. Communication: per-link rates (bandwidth x
// the link class's protocol efficiency) and latencies, so engines can share
// links between flows. Collectives: decomposed as NCCL does into point-to-point
// transfer stages (ring, pairwise, pipelined ring) that engines run over the
// Topology's routes. Formulas and their NCCL reasoning: docs/cost-model.md.
// Every parameter comes from the cluster JSON (CostSpec, GpuSpec).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/config/cluster.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"

namespace rm::cost {

// One point-to-point transfer of a decomposed collective. src and dst are
// indices into the group's member list; deps index earlier transfers of the
// same plan that must end before this one starts (-1: none).
struct PlannedTransfer {
  int src = 0;
  int dst = 0;
  double bytes = 0;
  std::array<int32_t, 2> deps{-1, -1};
};

// Broadcast pipelines its buffer through the ring in chunks of this size (as
// NCCL's ring broadcast does), at most kMaxBroadcastChunks chunks.
inline constexpr double kBroadcastChunkBytes = 512.0 * 1024;
inline constexpr int kMaxBroadcastChunks = 64;

// Below this fill (allowed entries / computed tile entries) an attention op is
// a sparse-index kernel. Dense causal tiles fill ~1 (only diagonal tiles are
// half full); vertical-slash tiles fill a few percent to a few tens.
inline constexpr double kSparseKernelFill = 0.5;

// Attention tile shape: turns `blocks` into the FLOPs a tile kernel performs.
// Must match the experiment's workload.block_q/block_k and the model's head_dim.
struct TileShape {
  int64_t bq = 128;
  int64_t bk = 64;
  int head_dim = 128;
};

class CostModel {
 public:
  explicit CostModel(const Cluster& c, TileShape tile = {});
  // The cost model of an experiment: its cluster, its kernel tile and head dim.
  static CostModel for_experiment(const Experiment& e) {
    return CostModel(e.cluster, TileShape{e.workload.block_q, e.workload.block_k, e.model.head_dim});
  }

  // Seconds a compute op runs alone on its stream:
  //   launch + max(flops / rate(kind), bytes / (HBM x elementwise_efficiency)).
  // rate(kind) = peak x efficiency: gemm -> gemm_efficiency; attn_fwd and
  // index_build -> attention_fwd_efficiency; attn_bwd ->
  // attention_bwd_efficiency; elementwise -> gemm_efficiency (its bytes
  // normally dominate). Attention ops with blocks > 0 are tile kernels: they
  // run max(flops, blocks x tile FLOPs); when the allowed entries fill less than
  // kSparseKernelFill of their tiles they are sparse-index kernels and run at
  // sparse_block_efficiency times the dense rate.
  double compute_seconds(const schedule::Op& op) const;

  // The same for an attention tile kernel given by its allowed-pair FLOPs and
  // computed tiles, without an Op: what `ringmaster imbalance` charges a ring
  // step, so that it and `simulate` share one attention-seconds path.
  double attention_seconds(double flops, double blocks, bool backward) const;
  // The rule "this attention op is a sparse-index kernel": its allowed pairs
  // fill less than kSparseKernelFill of the tiles it computes (blocks > 0).
  bool sparse_kernel(double flops, double blocks, bool backward) const;

  // Effective bytes/s of a link: bandwidth x its class's efficiency.
  double link_rate_Bps(const topology::Link& l) const;
  double link_latency_s(const topology::Link& l) const { return l.latency_us * 1e-6; }
  // Bytes/s of a transfer between two ranks on the same GPU (a device copy
  // that reads and writes every byte): HBM x elementwise_efficiency / 2.
  double local_copy_rate_Bps() const { return local_rate_; }

  // Contention-free time of one transfer: route latency + bytes over the
  // slowest effective link of the route (local copy when the route is empty).
  double transfer_seconds(const topology::Topology& t, int src_gpu, int dst_gpu, double bytes) const;

  // The point-to-point transfers a collective call is made of, for a group of
  // `members` ranks in group member order (the ring order). `bytes` is the
  // op's buffer as nccl-tests counts it: all_reduce and broadcast the buffer,
  // all_gather the gathered output, reduce_scatter the input, all_to_all the
  // whole send buffer of one rank. `root` is the broadcast root's member index.
  static std::vector<PlannedTransfer> plan_collective(schedule::OpKind kind, int members, double bytes,
                                                      int root = 0);

  // Contention-free time of a collective whose ring hops all cost
  // (latency_s, rate_Bps): the NCCL formulas of docs/cost-model.md.
  static double collective_seconds(schedule::OpKind kind, int members, double bytes, double latency_s,
                                   double rate_Bps);

  const Cluster& cluster() const { return c_; }

 private:
  double rate_flops(schedule::OpKind kind, bool sparse_kernel) const;
  double tile_flops(double blocks, bool backward) const;
  double seconds(schedule::OpKind kind, double flops, double blocks, double bytes) const;
  Cluster c_;
  TileShape tile_;
  double local_rate_ = 0;
};

}  // namespace rm::cost
