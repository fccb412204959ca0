// LoongTrain's double ring: windows of w context ranks are the inner rings;
// the outer ring joins the same position of every window (stride w). With
// placement = interleaved the windows take alternating context ranks
// (cp = 16, w = 4 -> [0,2,4,6] [1,3,5,7] [8,..] [9,..]).
#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/placement/attention_kind.hpp"

namespace rm::placement {
namespace {

class DoubleRingAttention final : public AttentionKind {
 public:
  DoubleRingAttention(std::string source, int window, bool interleaved)
      : source_(std::move(source)), window_(window), interleaved_(interleaved) {}
  std::vector<std::vector<int>> rings(const std::vector<int>& group_gpus, const topology::Topology&) const override {
    const int cp = int(group_gpus.size()), w = window_;
    if (cp % w != 0)
      throw ConfigError(fmt::format("{}: $.parallel.window: expected a divisor of cp ({}), got {}", source_, cp, w));
    if (interleaved_ && cp % (2 * w) != 0)
      throw ConfigError(fmt::format("{}: $.parallel.placement: interleaved windows need cp ({}) divisible by "
                                    "2*window ({})", source_, cp, 2 * w));
    std::vector<std::vector<int>> out;
    const int span = interleaved_ ? 2 * w : w, step = interleaved_ ? 2 : 1;
    for (int block = 0; block < cp; block += span)
      for (int parity = 0; parity < step; ++parity) {
        out.emplace_back();
        for (int i = 0; i < w; ++i) out.back().push_back(block + parity + step * i);
      }
    return out;
  }

 private:
  std::string source_;
  int window_;
  bool interleaved_;
};

}  // namespace

std::unique_ptr<AttentionKind> make_double_ring_attention(const Experiment& e) {
  if (e.parallel.window < 1)
    throw ConfigError(fmt::format("{}: $.parallel.window: expected at least 1, got {}", e.source, e.parallel.window));
  return std::make_unique<DoubleRingAttention>(e.source, e.parallel.window,
                                               e.parallel.placement == PlacementOrder::interleaved);
}

}  // namespace rm::placement
