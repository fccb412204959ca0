// Attention on one GPU per head rank (cp = 1): single-GPU reference, and the
// local part of Ulysses after its head all-to-all. A ring of one: one step.
#include "sim/placement/attention_kind.hpp"

namespace rm::placement {
namespace {

class LocalAttention final : public AttentionKind {
 public:
  std::vector<std::vector<int>> rings(const std::vector<int>&, const topology::Topology&) const override { return {{0}}; }
};

}  // namespace

std::unique_ptr<AttentionKind> make_local_attention(const Experiment&) { return std::make_unique<LocalAttention>(); }

}  // namespace rm::placement
