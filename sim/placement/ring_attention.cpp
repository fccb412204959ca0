// Ring attention over the whole context group (ring-flash-attention): at step
// k rank c holds the K/V of rank c - k. The partition (contiguous, zigzag,
// stripe, balanced) only changes the tokens, hence the work of each step.
#include "sim/placement/attention_kind.hpp"

namespace rm::placement {
namespace {

class RingAttention final : public AttentionKind {
 public:
  std::vector<std::vector<int>> rings(const std::vector<int>& group_gpus, const topology::Topology&) const override {
    std::vector<int> ring(group_gpus.size());
    for (size_t c = 0; c < ring.size(); ++c) ring[c] = int(c);
    return {ring};
  }
};

}  // namespace

std::unique_ptr<AttentionKind> make_ring_attention(const Experiment&) { return std::make_unique<RingAttention>(); }

}  // namespace rm::placement
