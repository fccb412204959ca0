// Ring attention over the whole context group (ring-flash-attention): at step
// k rank c holds the K/V of rank c - k. The partition (contiguous, zigzag,
// stripe, balanced) only changes the tokens, hence the work of each step.
#include "sim/generate/attention_kind.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::generate {
namespace {

class RingAttention final : public AttentionKind {
 public:
  std::string name() const override { return "ring"; }
  RingLayout layout(const std::vector<int>& group_gpus, const Topology&) const override {
    const int cp = int(group_gpus.size());
    RingLayout l;
    l.rings.emplace_back();
    for (int c = 0; c < cp; ++c) l.rings[0].push_back(c);
    l.sources = ring_sources(RingKind::ring, cp, 1, false, nullptr);
    return l;
  }
};

}  // namespace

std::unique_ptr<AttentionKind> make_ring_attention() { return std::make_unique<RingAttention>(); }

}  // namespace rm::generate
