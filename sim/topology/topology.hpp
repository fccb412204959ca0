// The cluster as a graph (Boost.Graph): GPUs, NVSwitches, PCIe hosts, NICs and
// fabric switches, each directed edge a link with bandwidth and latency.
// It answers what placement and the engines ask: the route between two GPUs
// (links crossed, bottleneck bandwidth, summed latency), which GPUs share a
// node or a NIC, and how many inter-node hops a ring order costs.
//
//   node n:  gpu0 ─┐                    ┌─ nic0 ─┐
//            gpu1 ─┼─ nvswitch (or mesh) │        ├─ fabric: one switch, leaf/spine,
//            ...   │   gpuK ── pcie ─────┴─ nicJ ─┘          or rails + spines
//            host ─┘ (PCIe fallback for mesh pairs without NVLink)
//
// Routes never pass through a GPU (NCCL does not relay point-to-point traffic
// through a third GPU); ECMP over spines is a fixed hash of the GPU pair so
// routes are deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/cluster.hpp"

namespace rm::topology {

enum class LinkClass { nvlink, pcie, network };

struct Link {
  int from = 0, to = 0;  // vertex ids
  double bandwidth_GBps = 0;
  double latency_us = 0;
  LinkClass cls = LinkClass::nvlink;
  std::string name;  // "n0/gpu1->n0/nvswitch"
};

struct Route {
  std::vector<int> links;       // link ids in order; empty when src == dst
  double bottleneck_GBps = 0;   // min bandwidth over the links (infinite when empty)
  double latency_us = 0;        // sum of link latencies
  bool inter_node = false;
  LinkClass slowest = LinkClass::nvlink;  // class of the bottleneck link
};

class Topology {
 public:
  explicit Topology(const Cluster& c);

  int gpus() const { return gpus_; }
  int nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }
  int nic_of(int gpu) const;  // global NIC index
  std::vector<int> gpus_sharing_nic(int gpu) const;

  const std::vector<Link>& links() const { return links_; }

  // Cached; throws std::out_of_range for a GPU outside the cluster.
  const Route& route(int src_gpu, int dst_gpu) const;

  // Consecutive pairs of a cyclic ring order (including last -> first) that cross nodes.
  int ring_inter_node_hops(const std::vector<int>& order) const;

 private:
  int add_vertex(std::string name, bool is_gpu);
  void add_duplex(int a, int b, double GBps, double latency_us, LinkClass cls);
  Route compute_route(int src_gpu, int dst_gpu) const;

  int gpus_ = 0, nodes_ = 0, gpus_per_node_ = 0, nics_per_node_ = 0, spines_ = 0;
  std::vector<std::string> vertex_names_;
  std::vector<char> is_gpu_;
  std::vector<int> spine_vertices_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> out_links_;  // adjacency kept for the Boost graph build
  mutable std::vector<Route> route_cache_;   // gpus x gpus, filled lazily
  mutable std::vector<char> route_known_;
};

}  // namespace rm::topology
