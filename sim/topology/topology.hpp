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
// routes are deterministic. They are computed on demand in O(route length):
// inter-node routes by closed form (the only path there is), intra-node ones
// from one table per node shape filled by Dijkstra at construction
// (docs/topology.md). route() keeps the routes asked for in a map (callers
// hold references into it; a mutex guards it, so a const Topology may be
// shared between threads); compute_route() keeps nothing. Memory is linear in
// GPUs and links, plus one entry per pair route() was asked for.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
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

// Fills a route's totals from its links (latency summed in link order, so every
// router gives the same last digit; the bottleneck and its class). The route's
// bottleneck_GBps must start at the value an empty route keeps.
void add_route_totals(Route& r, const std::vector<Link>& links);

class Topology {
 public:
  explicit Topology(const Cluster& c);
  // Every Cluster field the constructor reads, printed exactly: clusters with
  // equal keys give identical Topologies (cost, GPU and name fields do not count).
  static std::string key(const Cluster& c);

  int gpus() const { return gpus_; }
  int nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }
  int nic_of(int gpu) const;  // global NIC index
  std::vector<int> gpus_sharing_nic(int gpu) const;

  const std::vector<Link>& links() const { return links_; }

  // Throws std::out_of_range for a GPU outside the cluster. Identical, link for
  // link, to reference_route (sim/topology/shortest_path.hpp).
  // Kept for the pairs asked: the reference stays valid as long as the Topology.
  const Route& route(int src_gpu, int dst_gpu) const;
  // The same route, computed afresh (O(route length)) and not kept: for callers
  // that visit every pair once (a SimGrid platform) and should not grow the map.
  Route compute_route(int src_gpu, int dst_gpu) const;

  // Consecutive pairs of a cyclic ring order (including last -> first) that cross nodes.
  int ring_inter_node_hops(const std::vector<int>& order) const;

  // The graph itself, for the reference router and tests: vertex ids are GPUs
  // first (vertex id == GPU index), then switches, hosts and NICs.
  int vertices() const { return static_cast<int>(vertex_names_.size()); }
  const std::string& vertex_name(int v) const { return vertex_names_[static_cast<size_t>(v)]; }
  const std::vector<char>& gpu_vertices() const { return is_gpu_; }  // 1 where the vertex is a GPU
  const std::vector<int>& spine_vertices() const { return spine_vertices_; }
  // Heap and object bytes this Topology holds (names, links, the intra-node table).
  size_t memory_bytes() const;
  // Index into spine_vertices() that ECMP picks for the pair; -1 without spines.
  int ecmp_spine(int src_gpu, int dst_gpu) const;

 private:
  int add_vertex(std::string name, bool is_gpu);
  int add_duplex(int a, int b, double GBps, double latency_us, LinkClass cls);  // returns the a -> b link id
  int edge_switch_of_nic(int nic) const;  // index of the leaf, rail or single switch a NIC plugs into

  int gpus_ = 0, nodes_ = 0, gpus_per_node_ = 0, nics_per_node_ = 0, spines_ = 0;
  int nodes_per_leaf_ = 1;
  FabricKind fabric_ = FabricKind::single_switch;
  std::vector<std::string> vertex_names_;
  std::vector<char> is_gpu_;
  std::vector<int> spine_vertices_;
  std::vector<Link> links_;
  // Link ids the closed forms need (each duplex is two consecutive ids, a -> b then b -> a):
  int first_node_link_ = 0, links_per_node_ = 0;  // node n's links are one block, the same shape for every n
  std::vector<int> gpu_nic_link_;      // per GPU: gpu -> its NIC (empty on one node)
  std::vector<int> nic_switch_link_;   // per NIC: nic -> its edge switch
  // Edge switch e to spine s is link 2 * (e * spines_ + s) (spine -> e the next id).
  std::vector<Route> node_routes_;     // gpus_per_node^2 routes inside node 0, by Dijkstra

  // Routes route() was asked for, by src * gpus + dst. Map nodes stay put, so
  // references survive later insertions. A copied Topology starts empty.
  struct RouteCache {
    RouteCache() = default;
    RouteCache(const RouteCache&) {}
    RouteCache& operator=(const RouteCache&) { return *this; }
    std::mutex mutex;
    std::unordered_map<uint64_t, Route> routes;
  };
  mutable RouteCache cache_;
};

}  // namespace rm::topology
