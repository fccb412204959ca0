#include "sim/placement/ring_order.hpp"

#include <map>

namespace rm::placement {

std::vector<int> ring_order(RingOrder order, const std::vector<int>& group_gpus, const topology::Topology& topo) {
  const int W = int(group_gpus.size());
  std::vector<int> out;
  switch (order) {
    case RingOrder::rank:
      for (int c = 0; c < W; ++c) out.push_back(c);
      break;
    case RingOrder::zigzag_pairs:
      for (int i = 0; i < W / 2; ++i) out.insert(out.end(), {i, W - 1 - i});
      if (W % 2) out.push_back(W / 2);
      break;
    case RingOrder::topology: {
      std::map<int, int> slot;  // node -> its position in order of first appearance
      std::vector<std::vector<int>> by_node;
      for (int c = 0; c < W; ++c) {
        auto [it, fresh] = slot.try_emplace(topo.node_of(group_gpus[size_t(c)]), int(by_node.size()));
        if (fresh) by_node.emplace_back();
        by_node[size_t(it->second)].push_back(c);
      }
      for (const auto& ranks : by_node) out.insert(out.end(), ranks.begin(), ranks.end());
      break;
    }
  }
  return out;
}

int inter_node_hops(const std::vector<int>& ring, const std::vector<int>& group_gpus, const topology::Topology& topo) {
  const size_t n = ring.size();
  int hops = 0;
  for (size_t i = 0; n > 1 && i < n; ++i)
    hops += !topo.same_node(group_gpus[size_t(ring[i])], group_gpus[size_t(ring[(i + 1) % n])]);
  return hops;
}

}  // namespace rm::placement
