// Ring attention over the whole context group (ring-flash-attention): at step
// k the rank at ring position i holds the K/V of the rank at position i - k.
// The partition (contiguous, zigzag, stripe, balanced) only changes the tokens,
// hence the work of each step; `parallel.ring_order` the order of the ring
// (ring_order.hpp), hence which hops cross nodes.
#include "sim/placement/attention_kind.hpp"
#include "sim/placement/ring_order.hpp"

namespace rm::placement {
namespace {

class RingAttention final : public AttentionKind {
 public:
  explicit RingAttention(RingOrder order) : order_(order) {}
  std::vector<std::vector<int>> rings(const std::vector<int>& group_gpus, const topology::Topology& topo) const override {
    return {ring_order(order_, group_gpus, topo)};
  }

 private:
  RingOrder order_;
};

}  // namespace

std::unique_ptr<AttentionKind> make_ring_attention(const Experiment& e) {
  return std::make_unique<RingAttention>(e.parallel.ring_order);
}

}  // namespace rm::placement
