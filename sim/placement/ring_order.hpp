// The order in which a flat ring visits its context ranks (`parallel.ring_order`):
//   rank          0 -> 1 -> ... -> W-1 (ring-flash-attention, Megatron)
//   zigzag_pairs  0 -> W-1 -> 1 -> W-2 -> ... (MTraining's zigzag ring: on several
//                 nodes nearly every hop crosses nodes)
//   topology      fewest inter-node hops: the ranks grouped by node, nodes in the
//                 order their first context rank appears, ranks within a node in
//                 rank order. A ring over n nodes crosses nodes at least n times
//                 (n > 1); this order crosses exactly n times. Deterministic.
// Two-level rings (double_ring, hierarchical) lay out their own rings; the
// experiment accepts only `rank` with them.
#pragma once

#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/topology/topology.hpp"

namespace rm::placement {

// The ring, as context ranks in visiting order, of a group given its GPUs in context-rank order.
std::vector<int> ring_order(RingOrder order, const std::vector<int>& group_gpus, const topology::Topology& topo);

// Hops of the ring (including the closing one, last -> first) whose two GPUs are on different nodes.
int inter_node_hops(const std::vector<int>& ring, const std::vector<int>& group_gpus, const topology::Topology& topo);

}  // namespace rm::placement
