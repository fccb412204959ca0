#include "sim/topology/shortest_path.hpp"

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

Route dijkstra_route(const LinkGraph& lg, int src, int dst, int spine, bool inter_node) {
  Route r;
  r.inter_node = inter_node;
  r.bottleneck_GBps = std::numeric_limits<double>::infinity();
  if (src == dst) return r;

  const std::vector<Link>& links = *lg.links;
  const std::vector<char>& is_gpu = *lg.is_gpu;
  const std::vector<int>& spines = *lg.spine_vertices;
  Graph g(size_t(lg.vertices));
  std::vector<std::vector<int>> out_links(size_t(lg.vertices));
  for (int l = lg.first_link; l < lg.last_link; ++l) {
    const Link& L = links[size_t(l)];
    // Weight = time to move 1 MB over the link, so a slow PCIe detour never ties with NVLink.
    const double w = L.latency_us + 1e3 / L.bandwidth_GBps;
    boost::add_edge(size_t(L.from), size_t(L.to), EdgeProps{l, w}, g);
    out_links[size_t(L.from)].push_back(l);
  }
  auto allowed = [&](const Graph::edge_descriptor& e) {
    int from = int(boost::source(e, g)), to = int(boost::target(e, g));
    if (is_gpu[size_t(from)] && from != src) return false;  // no relaying through a GPU
    if (spine >= 0 && (std::find(spines.begin(), spines.end(), to) != spines.end()) && to != spine)
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
    for (int l : out_links[u])
      if (size_t(links[size_t(l)].to) == v) link = l;  // at most one link per ordered vertex pair
    rev.push_back(link);
  }
  r.links.assign(rev.rbegin(), rev.rend());
  add_route_totals(r, links);
  return r;
}

Route reference_route(const Topology& t, int src, int dst) {
  if (src < 0 || dst < 0 || src >= t.gpus() || dst >= t.gpus())
    throw std::out_of_range(fmt::format("route {} -> {}: GPU outside the cluster's {} GPUs", src, dst, t.gpus()));
  const LinkGraph g{&t.links(), 0, int(t.links().size()), t.vertices(), &t.gpu_vertices(), &t.spine_vertices()};
  const int s = t.ecmp_spine(src, dst);
  return dijkstra_route(g, src, dst, s < 0 ? -1 : t.spine_vertices()[size_t(s)], !t.same_node(src, dst));
}

}  // namespace rm::topology
