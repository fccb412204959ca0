#include "sim/calibrate/params.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace rm::calibrate {

namespace {

RateCurve& curve(AttentionKernel& k, bool backward, bool causal) {
  return backward ? (causal ? k.bwd_causal : k.bwd_full) : (causal ? k.fwd_causal : k.fwd_full);
}

nlohmann::json curve_json(const RateCurve& c) {
  nlohmann::json out = nlohmann::json::array();
  for (const RatePoint& p : c) out.push_back({p.tokens, p.tflops});
  return out;
}

}  // namespace

std::vector<ParamRef> all_params(const AttentionKernel& k) {
  std::vector<ParamRef> out;
  for (ParamKind kind : {ParamKind::gemm_efficiency, ParamKind::elementwise_efficiency, ParamKind::kernel_launch_us,
                         ParamKind::nvlink_efficiency, ParamKind::pcie_efficiency, ParamKind::network_efficiency,
                         ParamKind::intra_latency, ParamKind::pcie_latency, ParamKind::nic_latency})
    out.push_back({kind});
  for (bool backward : {false, true})
    for (bool causal : {false, true})
      for (size_t i = 0; i < k.curve(backward, causal).size(); ++i)
        out.push_back({ParamKind::kernel_rate, backward, causal, static_cast<int>(i)});
  return out;
}

std::string param_name(const ParamRef& r, const AttentionKernel& k) {
  switch (r.kind) {
    case ParamKind::gemm_efficiency: return "cost.gemm_efficiency";
    case ParamKind::elementwise_efficiency: return "cost.elementwise_efficiency";
    case ParamKind::kernel_launch_us: return "cost.kernel_launch_us";
    case ParamKind::nvlink_efficiency: return "cost.link_efficiency.nvlink";
    case ParamKind::pcie_efficiency: return "cost.link_efficiency.pcie";
    case ParamKind::network_efficiency: return "cost.link_efficiency.network";
    case ParamKind::intra_latency: return "intra_node.latency_us";
    case ParamKind::pcie_latency: return "pcie.latency_us";
    case ParamKind::nic_latency: return "nic.latency_us";
    case ParamKind::kernel_rate: {
      const RateCurve& c = k.curve(r.backward, r.causal);
      const double tokens = r.point >= 0 && size_t(r.point) < c.size() ? c[size_t(r.point)].tokens : -1;
      return fmt::format("kernel.{}_{}@{}", r.backward ? "bwd" : "fwd", r.causal ? "causal" : "full", tokens);
    }
  }
  return "?";
}

namespace {

// Where a parameter lives in p.
double& slot(CostParams& p, const ParamRef& r) {
  switch (r.kind) {
    case ParamKind::gemm_efficiency: return p.cluster.cost.gemm_efficiency;
    case ParamKind::elementwise_efficiency: return p.cluster.cost.elementwise_efficiency;
    case ParamKind::kernel_launch_us: return p.cluster.cost.kernel_launch_us;
    case ParamKind::nvlink_efficiency: return p.cluster.cost.nvlink_efficiency;
    case ParamKind::pcie_efficiency: return p.cluster.cost.pcie_efficiency;
    case ParamKind::network_efficiency: return p.cluster.cost.network_efficiency;
    case ParamKind::intra_latency: return p.cluster.intra.latency_us;
    case ParamKind::pcie_latency: return p.cluster.pcie.latency_us;
    case ParamKind::nic_latency: return p.cluster.nic.latency_us;
    case ParamKind::kernel_rate: {
      RateCurve& c = curve(p.kernel, r.backward, r.causal);
      if (r.point < 0 || size_t(r.point) >= c.size()) throw std::out_of_range("calibrate: no such kernel table point");
      return c[size_t(r.point)].tflops;
    }
  }
  throw std::out_of_range("calibrate: unknown parameter");
}

}  // namespace

double get(const CostParams& p, const ParamRef& r) { return slot(const_cast<CostParams&>(p), r); }
void set(CostParams& p, const ParamRef& r, double v) { slot(p, r) = v; }

Range range(const ParamRef& r, const CostParams& p) {
  switch (r.kind) {
    case ParamKind::gemm_efficiency:
    case ParamKind::elementwise_efficiency:
    case ParamKind::nvlink_efficiency:
    case ParamKind::pcie_efficiency:
    case ParamKind::network_efficiency: return {1e-3, 1.0};
    case ParamKind::kernel_launch_us: return {0.0, 1e4};
    case ParamKind::intra_latency:
    case ParamKind::pcie_latency:
    case ParamKind::nic_latency: return {0.0, 1e6};
    case ParamKind::kernel_rate: return {1e-9, p.cluster.gpu.peak_tflops_bf16};
  }
  return {0.0, 0.0};
}

double unit(const ParamRef& r) {
  switch (r.kind) {
    case ParamKind::gemm_efficiency:
    case ParamKind::elementwise_efficiency:
    case ParamKind::nvlink_efficiency:
    case ParamKind::pcie_efficiency:
    case ParamKind::network_efficiency: return 0.1;
    case ParamKind::kernel_launch_us:
    case ParamKind::intra_latency:
    case ParamKind::pcie_latency:
    case ParamKind::nic_latency: return 1.0;  // us
    case ParamKind::kernel_rate: return 1e-3;   // TFLOP/s
  }
  return 1.0;
}

Cluster apply(const Cluster& run_cluster, const Cluster& fitted) {
  Cluster c = fitted;
  c.nodes = run_cluster.nodes;
  c.gpus_per_node = run_cluster.gpus_per_node;
  c.nics_per_node = run_cluster.nics_per_node;
  return c;
}

nlohmann::json cluster_json(nlohmann::json base, const Cluster& fitted, const std::string& description) {
  base["description"] = description;
  base["cost"]["gemm_efficiency"] = fitted.cost.gemm_efficiency;
  base["cost"]["elementwise_efficiency"] = fitted.cost.elementwise_efficiency;
  base["cost"]["kernel_launch_us"] = fitted.cost.kernel_launch_us;
  base["cost"]["link_efficiency"] = {{"nvlink", fitted.cost.nvlink_efficiency},
                                     {"pcie", fitted.cost.pcie_efficiency},
                                     {"network", fitted.cost.network_efficiency}};
  base["intra_node"]["latency_us"] = fitted.intra.latency_us;
  base["pcie"]["latency_us"] = fitted.pcie.latency_us;
  if (base.contains("nic")) base["nic"]["latency_us"] = fitted.nic.latency_us;
  return base;
}

nlohmann::json kernel_json(nlohmann::json base, const AttentionKernel& fitted, const std::string& gpu_model,
                           const std::string& source) {
  // The first entry listing a GPU applies (parse_attention_kernel): the fitted
  // one goes first, and the GPU leaves the others (an entry left with no GPU goes).
  nlohmann::json gpus = nlohmann::json::array();
  gpus.push_back({{"models", {gpu_model}},
                  {"source", source},
                  {"fwd_tflops", {{"full", curve_json(fitted.fwd_full)}, {"causal", curve_json(fitted.fwd_causal)}}},
                  {"bwd_tflops", {{"full", curve_json(fitted.bwd_full)}, {"causal", curve_json(fitted.bwd_causal)}}}});
  if (base.contains("gpus") && base["gpus"].is_array())
    for (nlohmann::json g : base["gpus"]) {
      if (!g.is_object() || !g.contains("models") || !g["models"].is_array()) continue;
      nlohmann::json models = nlohmann::json::array();
      for (const auto& m : g["models"])
        if (!(m.is_string() && m.get<std::string>() == gpu_model)) models.push_back(m);
      if (models.empty()) continue;
      g["models"] = models;
      gpus.push_back(g);
    }
  base["gpus"] = gpus;
  return base;
}

}  // namespace rm::calibrate
