// A cluster as its JSON file describes it (configs/clusters/): GPUs, the
// intra-node interconnect, NICs and the inter-node fabric, plus the cost-model
// parameters that calibration fits. Units are in the field names.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "sim/config/json_reader.hpp"

namespace rm {

// The GPU's generation: which attention kernels run on it (FlashAttention-2 needs
// Ampere or newer, FlashAttention-3 Hopper), so which one an experiment gets
// when it names none (sim/config/kernel_default.hpp). cpu: the runtime's CPU backend.
enum class GpuArch { unknown, volta, ampere, hopper, cpu };
const char* to_string(GpuArch a);

struct GpuSpec {
  std::string model;
  GpuArch arch = GpuArch::unknown;  // gpu.arch; unknown when the file names none
  double memory_GB = 0;
  double peak_tflops_bf16 = 0;
  double hbm_bandwidth_GBps = 0;
  // The memory model's allowances (docs/memory.md): what the CUDA context and NCCL's
  // communicator buffers take on each GPU, and the caching allocator's fragmentation
  // as a fraction of the bytes the tensors occupy.
  double context_GB = 1.0;
  double fragmentation = 0.10;
};

enum class IntraKind { nvswitch, mesh };
struct MeshLink {
  int a = 0, b = 0, count = 1;  // count parallel NVLinks between GPU a and GPU b
};
struct IntraNodeSpec {
  IntraKind kind = IntraKind::nvswitch;
  double bandwidth_GBps = 0;  // nvswitch: per GPU per direction; mesh: per link per direction
  double latency_us = 0;
  std::vector<MeshLink> links;  // mesh only
};

struct LinkSpec {
  double bandwidth_GBps = 0;  // per direction
  double latency_us = 0;
};

enum class FabricKind { single_switch, leaf_spine, rail_optimized };
struct FabricSpec {
  FabricKind kind = FabricKind::single_switch;
  double switch_latency_us = 0;
  int nodes_per_leaf = 0;             // leaf_spine
  int spines = 0;                     // leaf_spine, rail_optimized
  double uplink_bandwidth_GBps = 0;   // leaf/rail switch to spine, per link per direction
};

// Parameters of the cost model (calibrated later); efficiencies are fractions of
// peak. Attention kernels' rates are per kernel, in configs/kernels/.
struct CostSpec {
  double gemm_efficiency = 0;
  double elementwise_efficiency = 0;   // fraction of HBM bandwidth
  double kernel_launch_us = 0;
  double nvlink_efficiency = 0, pcie_efficiency = 0, network_efficiency = 0;
};

struct Cluster {
  std::string name;
  GpuSpec gpu;
  int nodes = 0;
  int gpus_per_node = 0;
  IntraNodeSpec intra;
  LinkSpec pcie;
  int nics_per_node = 0;
  LinkSpec nic;  // bandwidth converted from Gb/s to GB/s
  FabricSpec fabric;
  CostSpec cost;

  int gpus() const { return nodes * gpus_per_node; }
};

Cluster parse_cluster(const JsonReader& r);

}  // namespace rm
