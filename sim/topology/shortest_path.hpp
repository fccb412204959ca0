// Routes by Dijkstra over the Topology's link graph: the original routing
// algorithm, kept as the reference the closed forms in topology.cpp must match
// link for link (tests/sim/topology_routes_test.cpp checks every GPU pair), and
// used by Topology itself once per cluster to route inside one node (a graph of
// a few dozen links), where ties between equal-cost PCIe detours are settled by
// Dijkstra's own visiting order and a closed form would have to imitate it.
#pragma once

#include <vector>

#include "sim/topology/topology.hpp"

namespace rm::topology {

// The links [first_link, last_link) of `links` as a graph over vertices
// 0..vertices-1; `is_gpu` and `spine_vertices` index those vertices.
struct LinkGraph {
  const std::vector<Link>* links = nullptr;
  int first_link = 0, last_link = 0;
  int vertices = 0;
  const std::vector<char>* is_gpu = nullptr;
  const std::vector<int>* spine_vertices = nullptr;
};

// Shortest-path route from src to dst by the time to move 1 MB over each link
// (latency + 1e3 / bandwidth), never relaying through a GPU other than src and
// entering no spine but `spine` (-1: any). Throws std::runtime_error when dst
// is unreachable.
Route dijkstra_route(const LinkGraph& g, int src, int dst, int spine, bool inter_node);

// The route the original Topology computed: Dijkstra over the whole cluster
// with the pair's ECMP spine. O(links log vertices) per call: for tests.
Route reference_route(const Topology& t, int src, int dst);

}  // namespace rm::topology
