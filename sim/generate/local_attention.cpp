// Attention on one GPU per head rank (cp = 1): single-GPU reference, and the
// local part of Ulysses after its head all-to-all. A ring of one: one step.
#include "sim/generate/attention_kind.hpp"

namespace rm::generate {
namespace {

class LocalAttention final : public AttentionKind {
 public:
  std::string name() const override { return "local"; }
  RingLayout layout(const std::vector<int>&, const Topology&) const override { return {{{0}}, {{0}}}; }
};

}  // namespace

std::unique_ptr<AttentionKind> make_local_attention() { return std::make_unique<LocalAttention>(); }

}  // namespace rm::generate
