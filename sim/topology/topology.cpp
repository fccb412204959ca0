#include "sim/topology/topology.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/topology/shortest_path.hpp"

namespace rm::topology {

int Topology::add_vertex(std::string name, bool is_gpu) {
  vertex_names_.push_back(std::move(name));
  is_gpu_.push_back(is_gpu ? 1 : 0);
  return static_cast<int>(vertex_names_.size()) - 1;
}

int Topology::add_duplex(int a, int b, double GBps, double latency_us, LinkClass cls) {
  const int first = static_cast<int>(links_.size());
  for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}})
    links_.push_back({x, y, GBps, latency_us, cls, vertex_names_[size_t(x)] + "->" + vertex_names_[size_t(y)]});
  return first;
}

Topology::Topology(const Cluster& c)
    : gpus_(c.gpus()),
      nodes_(c.nodes),
      gpus_per_node_(c.gpus_per_node),
      nics_per_node_(c.nics_per_node),
      nodes_per_leaf_(c.fabric.nodes_per_leaf),
      fabric_(c.fabric.kind) {
  // GPUs first so that vertex id == global GPU index.
  for (int n = 0; n < nodes_; ++n)
    for (int g = 0; g < gpus_per_node_; ++g) add_vertex(fmt::format("n{}/gpu{}", n, g), true);

  // Fabric switches. Link ids follow the order links are added here; the
  // closed forms in route() rely on it (spine links first, then one block per node).
  const auto& f = c.fabric;
  std::vector<int> leaf_or_rail;  // edge switch vertices
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

  first_node_link_ = static_cast<int>(links_.size());
  const int gpus_per_nic = gpus_per_node_ / nics_per_node_;
  if (nodes_ > 1) {
    gpu_nic_link_.resize(size_t(gpus_));
    nic_switch_link_.resize(size_t(nodes_) * size_t(nics_per_node_));
  }
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
        gpu_nic_link_[size_t(base + g)] =
            add_duplex(base + g, nic, c.pcie.bandwidth_GBps, c.pcie.latency_us, LinkClass::pcie);
      int sw = leaf_or_rail[size_t(edge_switch_of_nic(n * nics_per_node_ + i))];
      nic_switch_link_[size_t(n * nics_per_node_ + i)] =
          add_duplex(nic, sw, c.nic.bandwidth_GBps, c.nic.latency_us + f.switch_latency_us / 2, LinkClass::network);
    }
  }
  links_per_node_ = (static_cast<int>(links_.size()) - first_node_link_) / std::max(nodes_, 1);

  // Routes inside a node stay inside it (leaving through a NIC costs more than
  // the PCIe host path, which always exists), and every node's block of links
  // has the same shape and order, so Dijkstra over node 0's block -- which
  // visits vertices in the same order as over the whole cluster -- gives every
  // node's routes, shifted by n * links_per_node_.
  int block_vertices = gpus_per_node_;
  for (int l = first_node_link_; l < first_node_link_ + links_per_node_; ++l)
    block_vertices = std::max(block_vertices, links_[size_t(l)].from + 1);
  const LinkGraph node0{&links_, first_node_link_, first_node_link_ + links_per_node_, block_vertices, &is_gpu_,
                        &spine_vertices_};
  node_routes_.resize(size_t(gpus_per_node_) * size_t(gpus_per_node_));
  for (int a = 0; a < gpus_per_node_; ++a)
    for (int b = 0; b < gpus_per_node_; ++b)
      node_routes_[size_t(a * gpus_per_node_ + b)] = dijkstra_route(node0, a, b, -1, false);
}

std::string Topology::key(const Cluster& c) {
  // Keep in step with the constructor above: one field per value it reads.
  std::string k = fmt::format("{} {} {} {} {} {} | {} {} | {} {} {} | {} {} {} {} {}", c.nodes, c.gpus_per_node,
                              int(c.intra.kind), c.intra.bandwidth_GBps, c.intra.latency_us, c.nics_per_node,
                              c.pcie.bandwidth_GBps, c.pcie.latency_us, c.nic.bandwidth_GBps, c.nic.latency_us,
                              int(c.fabric.kind), c.fabric.switch_latency_us, c.fabric.nodes_per_leaf, c.fabric.spines,
                              c.fabric.uplink_bandwidth_GBps, c.intra.links.size());
  for (const MeshLink& m : c.intra.links) k += fmt::format(" {}-{}x{}", m.a, m.b, m.count);
  return k;
}

size_t Topology::memory_bytes() const {
  auto string_bytes = [](const std::string& x) { return x.capacity() > 15 ? x.capacity() + 1 : 0; };  // beyond SSO
  size_t b = sizeof(*this) + vertex_names_.capacity() * sizeof(std::string) + is_gpu_.capacity() +
             spine_vertices_.capacity() * sizeof(int) + links_.capacity() * sizeof(Link) +
             (gpu_nic_link_.capacity() + nic_switch_link_.capacity()) * sizeof(int) +
             node_routes_.capacity() * sizeof(Route);
  for (const std::string& n : vertex_names_) b += string_bytes(n);
  for (const Link& l : links_) b += string_bytes(l.name);
  for (const Route& r : node_routes_) b += r.links.capacity() * sizeof(int);
  std::lock_guard<std::mutex> lock(cache_.mutex);
  // Per cached route: its map node (key, Route, next pointer, hash) and its links.
  b += cache_.routes.bucket_count() * sizeof(void*);
  for (const auto& [k, r] : cache_.routes) b += sizeof(k) + sizeof(Route) + 2 * sizeof(void*) + r.links.capacity() * sizeof(int);
  return b;
}

int Topology::nic_of(int gpu) const {
  return node_of(gpu) * nics_per_node_ + (gpu % gpus_per_node_) / (gpus_per_node_ / nics_per_node_);
}

int Topology::edge_switch_of_nic(int nic) const {
  switch (fabric_) {
    case FabricKind::single_switch: return 0;
    case FabricKind::leaf_spine: return nic / nics_per_node_ / nodes_per_leaf_;
    case FabricKind::rail_optimized: return nic % nics_per_node_;
  }
  return 0;
}

std::vector<int> Topology::gpus_sharing_nic(int gpu) const {
  std::vector<int> out;
  for (int g = node_of(gpu) * gpus_per_node_; g < (node_of(gpu) + 1) * gpus_per_node_; ++g)
    if (nic_of(g) == nic_of(gpu)) out.push_back(g);
  return out;
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

int Topology::ecmp_spine(int src, int dst) const {
  return spines_ > 0 ? static_cast<int>(ecmp_hash(src, dst) % uint64_t(spines_)) : -1;
}

const Route& Topology::route(int src, int dst) const {
  if (src < 0 || dst < 0 || src >= gpus_ || dst >= gpus_)
    throw std::out_of_range(fmt::format("route {} -> {}: GPU outside the cluster's {} GPUs", src, dst, gpus_));
  const uint64_t key = uint64_t(src) * uint64_t(gpus_) + uint64_t(dst);
  std::lock_guard<std::mutex> lock(cache_.mutex);
  auto it = cache_.routes.find(key);
  if (it == cache_.routes.end()) it = cache_.routes.emplace(key, compute_route(src, dst)).first;
  return it->second;
}

Route Topology::compute_route(int src, int dst) const {
  if (src < 0 || dst < 0 || src >= gpus_ || dst >= gpus_)
    throw std::out_of_range(fmt::format("route {} -> {}: GPU outside the cluster's {} GPUs", src, dst, gpus_));
  Route r;
  r.inter_node = !same_node(src, dst);
  r.bottleneck_GBps = std::numeric_limits<double>::infinity();
  if (src == dst) return r;

  if (!r.inter_node) {
    const int shift = node_of(src) * links_per_node_;
    const Route& local = node_routes_[size_t((src % gpus_per_node_) * gpus_per_node_ + dst % gpus_per_node_)];
    r.links.reserve(local.links.size());
    for (int l : local.links) r.links.push_back(l + shift);
  } else {
    // Across nodes the path is unique: a GPU reaches the network only through
    // its NIC, and the destination only through its own NIC, whose edge switch
    // is reached directly or through the pair's ECMP spine (no GPU relays).
    const int src_nic = nic_of(src), dst_nic = nic_of(dst);
    const int src_edge = edge_switch_of_nic(src_nic), dst_edge = edge_switch_of_nic(dst_nic);
    r.links.reserve(6);
    r.links.push_back(gpu_nic_link_[size_t(src)]);
    r.links.push_back(nic_switch_link_[size_t(src_nic)]);
    if (src_edge != dst_edge) {
      if (spines_ == 0) throw std::runtime_error(fmt::format("topology: no route from GPU {} to GPU {}", src, dst));
      const int s = ecmp_spine(src, dst);
      r.links.push_back(2 * (src_edge * spines_ + s));
      r.links.push_back(2 * (dst_edge * spines_ + s) + 1);
    }
    r.links.push_back(nic_switch_link_[size_t(dst_nic)] + 1);
    r.links.push_back(gpu_nic_link_[size_t(dst)] + 1);
  }
  add_route_totals(r, links_);
  return r;
}

void add_route_totals(Route& r, const std::vector<Link>& links) {
  for (int l : r.links) {
    const Link& L = links[size_t(l)];
    r.latency_us += L.latency_us;
    if (L.bandwidth_GBps < r.bottleneck_GBps) {
      r.bottleneck_GBps = L.bandwidth_GBps;
      r.slowest = L.cls;
    }
  }
}

int Topology::ring_inter_node_hops(const std::vector<int>& order) const {
  if (order.size() < 2) return 0;
  int hops = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (!same_node(order[i], order[(i + 1) % order.size()])) ++hops;
  return hops;
}

}  // namespace rm::topology
