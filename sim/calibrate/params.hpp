// The cost-model parameters calibration fits, as one flat vector over a
// Cluster and an AttentionKernel: which fields there are, their names, their
// physical ranges, and how fitted values are written back into the cluster
// and kernel JSON files (so `simulate --set cluster=... --set
// kernel.attention=...` reads them). The formulas that use them stay in
// sim/cost (CostModel); this file only says where each number lives.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/attention_kernel.hpp"
#include "sim/config/cluster.hpp"

namespace rm::calibrate {

enum class ParamKind {
  gemm_efficiency,         // cost.gemm_efficiency
  elementwise_efficiency,  // cost.elementwise_efficiency (fraction of HBM)
  kernel_launch_us,        // cost.kernel_launch_us: every compute op's overhead
  // Link rates by class: the efficiencies, not the bandwidths, since the
  // Topology routes by bandwidth and latency and a fit must not reroute.
  nvlink_efficiency,       // cost.link_efficiency.nvlink (the intra-node links)
  pcie_efficiency,         // cost.link_efficiency.pcie
  network_efficiency,      // cost.link_efficiency.network (NIC to switch)
  intra_latency,           // intra_node.latency_us
  pcie_latency,            // pcie.latency_us
  nic_latency,             // nic.latency_us
  kernel_rate,             // one point of the attention kernel's table (TFLOP/s)
};

struct ParamRef {
  ParamKind kind = ParamKind::gemm_efficiency;
  bool backward = false, causal = false;  // kernel_rate: which curve
  int point = -1;                         // kernel_rate: index into the curve
};

// What the cost model reads: the cluster's fields and the kernel's table.
struct CostParams {
  Cluster cluster;
  AttentionKernel kernel;
};

// Every parameter of `p`, in a fixed order (cost, links, then the kernel's
// curves fwd full, fwd causal, bwd full, bwd causal by tokens).
std::vector<ParamRef> all_params(const AttentionKernel& k);
// "cost.gemm_efficiency", "intra_node.latency_us", "kernel.fwd_causal@2048", ...
std::string param_name(const ParamRef& r, const AttentionKernel& k);
// The field's value, and setting it.
double get(const CostParams& p, const ParamRef& r);
void set(CostParams& p, const ParamRef& r, double v);
// The range the cluster and kernel parsers accept (efficiencies in [1e-3, 1],
// latencies >= 0, kernel rates in (0, the GPU peak]).
struct Range {
  double lo = 0, hi = 0;
};
Range range(const ParamRef& r, const CostParams& p);
// The unit a parameter is scaled by when it is 0 (a latency of 0 us).
double unit(const ParamRef& r);

// The calibrated cluster in the run's shape (nodes x GPUs per node): runs of
// one machine seen as different shapes (--set cluster.nodes=2 for a
// hierarchical ring) share its links and parameters. Links, GPU and fabric
// are the calibrated cluster's, so --cluster can also settle how transfers
// route (the runtime itself never reads them).
Cluster apply(const Cluster& run_cluster, const Cluster& fitted);

// `base` (a cluster JSON) with every fitted field replaced by fitted's value.
nlohmann::json cluster_json(nlohmann::json base, const Cluster& fitted, const std::string& description);
// `base` (a kernel JSON) with the entry for `gpu_model` replaced by fitted's curves.
nlohmann::json kernel_json(nlohmann::json base, const AttentionKernel& fitted, const std::string& gpu_model,
                           const std::string& source);

}  // namespace rm::calibrate
