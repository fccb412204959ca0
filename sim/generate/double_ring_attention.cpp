// LoongTrain's double ring: windows of w context ranks are the inner rings;
// the outer ring joins the same position of every window (stride w, or the
// interleaved windows' order). Per window round: post the inter-window K/V
// transfer, run the w inner steps, await it.
#include "sim/generate/attention_kind.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::generate {
namespace {

class DoubleRingAttention final : public AttentionKind {
 public:
  DoubleRingAttention(int window, bool interleaved) : window_(window), interleaved_(interleaved) {}
  std::string name() const override { return "double_ring"; }
  RingLayout layout(const std::vector<int>& group_gpus, const Topology&) const override {
    const int cp = int(group_gpus.size());
    return {double_ring_windows(cp, window_, interleaved_),
            ring_sources(RingKind::double_ring, cp, window_, interleaved_, nullptr)};
  }

 private:
  int window_;
  bool interleaved_;
};

}  // namespace

std::unique_ptr<AttentionKind> make_double_ring_attention(int window, bool interleaved) {
  return std::make_unique<DoubleRingAttention>(window, interleaved);
}

}  // namespace rm::generate
