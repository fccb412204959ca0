#include "sim/config/cluster.hpp"

#include <fmt/format.h>

namespace rm {

namespace {
constexpr double kBig = 1e9;

const EnumName<IntraKind> kIntraKinds[] = {{IntraKind::nvswitch, "nvswitch"}, {IntraKind::mesh, "mesh"}};
const EnumName<FabricKind> kFabricKinds[] = {{FabricKind::single_switch, "single_switch"},
                                             {FabricKind::leaf_spine, "leaf_spine"},
                                             {FabricKind::rail_optimized, "rail_optimized"}};
const EnumName<GpuArch> kArchs[] = {{GpuArch::volta, "volta"},
                                    {GpuArch::ampere, "ampere"},
                                    {GpuArch::hopper, "hopper"},
                                    {GpuArch::cpu, "cpu"}};

LinkSpec parse_link_GBps(const JsonReader& r) {
  LinkSpec l;
  l.bandwidth_GBps = r.number("bandwidth_GBps", 1e-3, kBig);
  l.latency_us = r.number("latency_us", 0, 1e6);
  r.finish();
  return l;
}
}  // namespace

const char* to_string(GpuArch a) { return a == GpuArch::unknown ? "unknown" : name_of(kArchs, a); }

Cluster parse_cluster(const JsonReader& r) {
  Cluster c;
  c.name = r.str("name");
  {
    auto g = r.object("gpu");
    c.gpu.model = g.str("model");
    c.gpu.arch = g.has("arch") ? g.enum_of("arch", kArchs) : GpuArch::unknown;
    c.gpu.memory_GB = g.number("memory_GB", 1, 1e5);
    c.gpu.peak_tflops_bf16 = g.number("peak_tflops_bf16", 1e-3, 1e6);  // CPU "GPUs" (the runtime's cpu backend) reach ~0.2
    c.gpu.hbm_bandwidth_GBps = g.number("hbm_bandwidth_GBps", 1, 1e6);
    c.gpu.context_GB = g.number_or("context_GB", 0, 1e5, c.gpu.context_GB);
    c.gpu.fragmentation = g.number_or("fragmentation", 0, 10, c.gpu.fragmentation);
    g.finish();
  }
  c.nodes = static_cast<int>(r.integer("nodes", 1, 100000));
  c.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 1, 64));
  {
    auto in = r.object("intra_node");
    c.intra.kind = in.enum_of("kind", kIntraKinds);
    c.intra.bandwidth_GBps = in.number("bandwidth_GBps", 1e-3, kBig);
    c.intra.latency_us = in.number("latency_us", 0, 1e6);
    if (c.intra.kind == IntraKind::mesh) {
      const auto& links = in.value("links");
      if (!links.is_array()) in.fail("links", "expected an array of [gpu_a, gpu_b, count] triples");
      for (size_t i = 0; i < links.size(); ++i) {
        const auto& t = links[i];
        std::string key = fmt::format("links[{}]", i);
        if (!t.is_array() || t.size() != 3 || !t[0].is_number_integer() || !t[1].is_number_integer() ||
            !t[2].is_number_integer())
          in.fail(key, "expected [gpu_a, gpu_b, count] with integers");
        MeshLink m{t[0].get<int>(), t[1].get<int>(), t[2].get<int>()};
        if (m.a < 0 || m.b < 0 || m.a >= c.gpus_per_node || m.b >= c.gpus_per_node || m.a == m.b)
          in.fail(key, fmt::format("expected two different GPUs in [0, {})", c.gpus_per_node));
        if (m.count < 1 || m.count > 18) in.fail(key, "expected a link count in [1, 18]");
        c.intra.links.push_back(m);
      }
    }
    in.finish();
  }
  c.pcie = parse_link_GBps(r.object("pcie"));
  c.nics_per_node = static_cast<int>(r.integer("nics_per_node", 1, 64));  // GPUs share NICs evenly
  if (c.gpus_per_node % c.nics_per_node != 0)
    r.fail("nics_per_node", fmt::format("expected a divisor of gpus_per_node ({}), got {}", c.gpus_per_node, c.nics_per_node));
  {
    auto n = r.object("nic");
    c.nic.bandwidth_GBps = n.number("bandwidth_Gbps", 1e-3, kBig) / 8.0;
    c.nic.latency_us = n.number("latency_us", 0, 1e6);
    n.finish();
  }
  {
    auto f = r.object("fabric");
    c.fabric.kind = f.enum_of("kind", kFabricKinds);
    c.fabric.switch_latency_us = f.number("switch_latency_us", 0, 1e6);
    if (c.fabric.kind == FabricKind::leaf_spine)
      c.fabric.nodes_per_leaf = static_cast<int>(f.integer("nodes_per_leaf", 1, 100000));
    if (c.fabric.kind != FabricKind::single_switch) {
      c.fabric.spines = static_cast<int>(f.integer("spines", 1, 1024));
      c.fabric.uplink_bandwidth_GBps = f.number("uplink_bandwidth_Gbps", 1e-3, kBig) / 8.0;
    }
    f.finish();
  }
  {
    auto k = r.object("cost");
    c.cost.gemm_efficiency = k.number("gemm_efficiency", 1e-3, 1);
    c.cost.elementwise_efficiency = k.number("elementwise_efficiency", 1e-3, 1);
    c.cost.kernel_launch_us = k.number("kernel_launch_us", 0, 1e4);
    auto le = k.object("link_efficiency");
    c.cost.nvlink_efficiency = le.number("nvlink", 1e-3, 1);
    c.cost.pcie_efficiency = le.number("pcie", 1e-3, 1);
    c.cost.network_efficiency = le.number("network", 1e-3, 1);
    le.finish();
    k.finish();
  }
  r.finish();
  return c;
}

}  // namespace rm
