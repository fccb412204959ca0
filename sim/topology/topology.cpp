#include "sim/topology/topology.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <fmt/format.h>

namespace rm::topology {

namespace {
struct EdgeProps {
  int link = 0;
  double weight = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;
}  // namespace

int Topology::add_vertex(std::string name, bool is_gpu) {
  vertex_names_.push_back(std::move(name));
  is_gpu_.push_back(is_gpu ? 1 : 0);
  out_links_.emplace_back();
  return static_cast<int>(vertex_names_.size()) - 1;
}

void Topology::add_duplex(int a, int b, double GBps, double latency_us, LinkClass cls) {
  for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
    links_.push_back({x, y, GBps, latency_us, cls, vertex_names_[size_t(x)] + "->" + vertex_names_[size_t(y)]});
    out_links_[size_t(x)].push_back(static_cast<int>(links_.size()) - 1);
  }
}

Topology::Topology(const Cluster& c)
    : gpus_(c.gpus()), nodes_(c.nodes), gpus_per_node_(c.gpus_per_node), nics_per_node_(c.nics_per_node) {
  // GPUs first so that vertex id == global GPU index.
  for (int n = 0; n < nodes_; ++n)
    for (int g = 0; g < gpus_per_node_; ++g) add_vertex(fmt::format("n{}/gpu{}", n, g), true);

  // Fabric switches.
  const auto& f = c.fabric;
  std::vector<int> edge_switch;  // per (node, nic index) -> switch vertex
  std::vector<int> leaf_or_rail;
  if (f.kind == FabricKind::single_switch) {
    leaf_or_rail.push_back(add_vertex("switch", false));
  } else if (f.kind == FabricKind::leaf_spine) {
    int leaves = (nodes_ + f.nodes_per_leaf - 1) / f.nodes_per_leaf;
    for (int l = 0; l < leaves; ++l) leaf_or_rail.push_back(add_vertex(fmt::format("leaf{}", l), false));
  } else {
    for (int r = 0; r < nics_per_node_; ++r) leaf_or_rail.push_back(add_vertex(fmt::format("rail{}", r), false));
  }
  if (f.kind != FabricKind::single_switch && nodes_ > 1) {
    spines_ = f.spines;
    for (int s = 0; s < spines_; ++s) spine_vertices_.push_back(add_vertex(fmt::format("spine{}", s), false));
    for (int sw : leaf_or_rail)
      for (int sp : spine_vertices_)
        add_duplex(sw, sp, f.uplink_bandwidth_GBps, f.switch_latency_us, LinkClass::network);
  }

  const int gpus_per_nic = gpus_per_node_ / nics_per_node_;
  for (int n = 0; n < nodes_; ++n) {
    const int base = n * gpus_per_node_;
    if (c.intra.kind == IntraKind::nvswitch) {
      int sw = add_vertex(fmt::format("n{}/nvswitch", n), false);
      for (int g = 0; g < gpus_per_node_; ++g)
        add_duplex(base + g, sw, c.intra.bandwidth_GBps, c.intra.latency_us / 2, LinkClass::nvlink);
    } else {
      for (const auto& m : c.intra.links)
        add_duplex(base + m.a, base + m.b, c.intra.bandwidth_GBps * m.count, c.intra.latency_us, LinkClass::nvlink);
    }
    // PCIe host: the path of last resort inside a node (mesh pairs without NVLink).
    int host = add_vertex(fmt::format("n{}/host", n), false);
    for (int g = 0; g < gpus_per_node_; ++g) add_duplex(base + g, host, c.pcie.bandwidth_GBps, c.pcie.latency_us, LinkClass::pcie);
    if (nodes_ == 1) continue;  // a single node needs no NICs
    for (int i = 0; i < nics_per_node_; ++i) {
      int nic = add_vertex(fmt::format("n{}/nic{}", n, i), false);
      for (int g = i * gpus_per_nic; g < (i + 1) * gpus_per_nic; ++g)
        add_duplex(base + g, nic, c.pcie.bandwidth_GBps, c.pcie.latency_us, LinkClass::pcie);
      int sw = f.kind == FabricKind::single_switch ? leaf_or_rail[0]
               : f.kind == FabricKind::leaf_spine  ? leaf_or_rail[size_t(n / f.nodes_per_leaf)]
                                                   : leaf_or_rail[size_t(i)];
      add_duplex(nic, sw, c.nic.bandwidth_GBps, c.nic.latency_us + f.switch_latency_us / 2, LinkClass::network);
    }
  }
  route_cache_.resize(size_t(gpus_) * size_t(gpus_));
  route_known_.assign(size_t(gpus_) * size_t(gpus_), 0);
}

int Topology::nic_of(int gpu) const {
  return node_of(gpu) * nics_per_node_ + (gpu % gpus_per_node_) / (gpus_per_node_ / nics_per_node_);
}

std::vector<int> Topology::gpus_sharing_nic(int gpu) const {
  std::vector<int> out;
  for (int g = node_of(gpu) * gpus_per_node_; g < (node_of(gpu) + 1) * gpus_per_node_; ++g)
    if (nic_of(g) == nic_of(gpu)) out.push_back(g);
  return out;
}

const Route& Topology::route(int src, int dst) const {
  if (src < 0 || dst < 0 || src >= gpus_ || dst >= gpus_)
    throw std::out_of_range(fmt::format("route {} -> {}: GPU outside the cluster's {} GPUs", src, dst, gpus_));
  size_t k = size_t(src) * size_t(gpus_) + size_t(dst);
  if (!route_known_[k]) {
    route_cache_[k] = compute_route(src, dst);
    route_known_[k] = 1;
  }
  return route_cache_[k];
}

namespace {
// ECMP picks a spine per flow by hashing its header; a fixed mix of the GPU
// pair stands in for it (a plain (src + dst) mod spines sends every flow of a
// node-strided ring through one spine).
uint64_t ecmp_hash(int src, int dst) {
  uint64_t x = (uint64_t(uint32_t(src)) << 32) ^ uint64_t(uint32_t(dst));
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

Route Topology::compute_route(int src, int dst) const {
  Route r;
  r.inter_node = !same_node(src, dst);
  r.bottleneck_GBps = std::numeric_limits<double>::infinity();
  if (src == dst) return r;

  Graph g(vertex_names_.size());
  for (size_t l = 0; l < links_.size(); ++l) {
    // Weight = time to move 1 MB over the link, so a slow PCIe detour never ties with NVLink.
    const double w = links_[l].latency_us + 1e3 / links_[l].bandwidth_GBps;
    boost::add_edge(size_t(links_[l].from), size_t(links_[l].to), EdgeProps{int(l), w}, g);
  }
  const int spine = spines_ > 0 ? spine_vertices_[size_t(ecmp_hash(src, dst) % uint64_t(spines_))] : -1;
  auto allowed = [&](const Graph::edge_descriptor& e) {
    int from = int(boost::source(e, g)), to = int(boost::target(e, g));
    if (is_gpu_[size_t(from)] && from != src) return false;  // no relaying through a GPU
    if (spine >= 0 && (std::find(spine_vertices_.begin(), spine_vertices_.end(), to) != spine_vertices_.end()) && to != spine)
      return false;  // ECMP: one spine per GPU pair
    return true;
  };
  boost::filtered_graph<Graph, std::function<bool(const Graph::edge_descriptor&)>> fg(g, allowed);
  std::vector<Graph::vertex_descriptor> pred(boost::num_vertices(g));
  std::vector<double> dist(boost::num_vertices(g));
  boost::dijkstra_shortest_paths(
      fg, size_t(src),
      boost::predecessor_map(pred.data()).distance_map(dist.data()).weight_map(boost::get(&EdgeProps::weight, g)));
  if (pred[size_t(dst)] == size_t(dst))
    throw std::runtime_error(fmt::format("topology: no route from GPU {} to GPU {}", src, dst));
  std::vector<int> rev;
  for (size_t v = size_t(dst); v != size_t(src); v = pred[v]) {
    size_t u = pred[v];
    int link = -1;
    for (int l : out_links_[u])
      if (size_t(links_[size_t(l)].to) == v) link = l;  // at most one link per ordered vertex pair
    rev.push_back(link);
  }
  r.links.assign(rev.rbegin(), rev.rend());
  for (int l : r.links) {
    const Link& L = links_[size_t(l)];
    r.latency_us += L.latency_us;
    if (L.bandwidth_GBps < r.bottleneck_GBps) {
      r.bottleneck_GBps = L.bandwidth_GBps;
      r.slowest = L.cls;
    }
  }
  return r;
}

int Topology::ring_inter_node_hops(const std::vector<int>& order) const {
  if (order.size() < 2) return 0;
  int hops = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (!same_node(order[i], order[(i + 1) % order.size()])) ++hops;
  return hops;
}

}  // namespace rm::topology
