// MTraining's hierarchical sparse ring: the context ranks of one node form the
// inner ring (NVLink), the same inner position across nodes the outer ring
// (one NIC each). One slow inter-node transfer hides behind a whole inner ring.
#include "sim/generate/attention_kind.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::generate {
namespace {

class HierarchicalRingAttention final : public AttentionKind {
 public:
  std::string name() const override { return "hierarchical"; }
  RingLayout layout(const std::vector<int>& group_gpus, const Topology& topo) const override {
    RingHierarchy h = node_local_rings(group_gpus, topo);
    auto sources = ring_sources(RingKind::hierarchical, int(group_gpus.size()), 1, false, &h);
    return {std::move(h.inner), std::move(sources)};
  }
};

}  // namespace

std::unique_ptr<AttentionKind> make_hierarchical_ring_attention() {
  return std::make_unique<HierarchicalRingAttention>();
}

}  // namespace rm::generate
