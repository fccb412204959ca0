// MTraining's hierarchical sparse ring: the context ranks of one node form the
// inner ring (NVLink), the same inner position across nodes the outer ring
// (one NIC each). One slow inter-node transfer hides behind a whole inner ring.
#include <map>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/placement/attention_kind.hpp"

namespace rm::placement {
namespace {

class HierarchicalRingAttention final : public AttentionKind {
 public:
  explicit HierarchicalRingAttention(std::string source) : source_(std::move(source)) {}
  std::vector<std::vector<int>> rings(const std::vector<int>& group_gpus, const topology::Topology& topo) const override {
    std::map<int, std::vector<int>> by_node;
    for (int c = 0; c < int(group_gpus.size()); ++c) by_node[topo.node_of(group_gpus[size_t(c)])].push_back(c);
    const auto& [first_node, first] = *by_node.begin();
    for (const auto& [node, ranks] : by_node)
      if (ranks.size() != first.size())
        throw ConfigError(fmt::format("{}: $.parallel.ring: hierarchical needs as many context ranks on every node; "
                                      "the context group holds {} on node {} and {} on node {}",
                                      source_, first.size(), first_node, ranks.size(), node));
    std::vector<std::vector<int>> out;
    for (auto& [node, ranks] : by_node) out.push_back(std::move(ranks));
    return out;
  }

 private:
  std::string source_;
};

}  // namespace

std::unique_ptr<AttentionKind> make_hierarchical_ring_attention(const Experiment& e) {
  return std::make_unique<HierarchicalRingAttention>(e.source);
}

}  // namespace rm::placement
