// Attention workload imbalance of a context-parallel ring, per partition.
// With work[r][k] the attention work of rank r at ring step k:
//   worker-level imbalance = max_r sum_k work / mean_r sum_k work   (what a rank's total load costs)
//   step-level imbalance   = sum_k max_r work / sum_k mean_r work   (what a ring, whose steps
//                                                                     advance together, pays)
// per layer, then over all layers weighted by work (sums of maxima over sums of means).
// Ring layouts come from the experiment's attention kind and seconds from its
// CostModel, as in `simulate`: a layer's step_seconds is the sum over ring
// steps of the slowest rank's attn_fwd op. Also counts ring steps whose
// compute is shorter than the next K/V transfer (overlap lost).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/placement/work_cache.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/topology/topology.hpp"

namespace rm::report {

struct LayerImbalance {
  double worker = 1, step = 1;          // on computed blocks
  double worker_nnz = 1, step_nnz = 1;  // on non-zeros (effective FLOPs)
  double blocks = 0;                    // total computed blocks of the layer (all ranks)
  double step_seconds = 0;              // sum over steps of the slowest rank's attn_fwd seconds
  double ideal_seconds = 0;             // the same work perfectly balanced (every rank, every step the mean)
  int overlap_lost_steps = 0;           // steps whose compute is shorter than the next K/V transfer
  int transfer_steps = 0;
  bool operator==(const LayerImbalance&) const = default;
};

struct PartitionImbalance {
  Partition partition = Partition::stripe;
  std::vector<LayerImbalance> layers;
  LayerImbalance total;          // weighted over layers
  double ideal_fraction = 1;     // ideal_seconds / step_seconds: the share of attention time balance keeps
  double kv_transfer_seconds = 0;  // one ring step's K/V transfer, slowest rank and step
  bool operator==(const PartitionImbalance&) const = default;
};

struct ImbalanceReport {
  std::vector<PartitionImbalance> partitions;
  std::vector<std::string> skipped;  // partitions that do not apply, with the reason
  double block_sparsity = 0;         // mean over layers of computed/causal blocks, for context
  bool operator==(const ImbalanceReport&) const = default;
};

using Progress = std::function<void(const std::string& what, int done, int total)>;

// `cache` (may be null) supplies partitions and pair costs (placement/work_cache.hpp).
// Throws rm::ConfigError when the ring cannot be laid out.
ImbalanceReport imbalance_report(const Experiment& e, const sparsity::SparsityModel& m, const topology::Topology& topo,
                                 const std::vector<Partition>& partitions, const Progress& progress = {},
                                 placement::WorkCache* cache = nullptr);

}  // namespace rm::report
