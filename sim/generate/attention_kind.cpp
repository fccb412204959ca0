#include "sim/generate/attention_kind.hpp"

namespace rm::generate {

std::unique_ptr<AttentionKind> make_attention_kind(const Experiment& e) {
  const Parallel& p = e.parallel;
  if (p.cp == 1) return make_local_attention();
  switch (p.ring) {
    case RingKind::ring: return make_ring_attention();
    case RingKind::double_ring:
      return make_double_ring_attention(p.window, p.placement == PlacementOrder::interleaved);
    case RingKind::hierarchical: return make_hierarchical_ring_attention();
  }
  return make_ring_attention();
}

std::string generator_name(const Experiment& e, bool sparse) {
  const Parallel& p = e.parallel;
  if (p.cp == 1) return p.hp == 1 ? "single_gpu" : "ulysses";
  std::string partition;
  switch (p.partition) {
    case Partition::contiguous: partition = "ring"; break;
    case Partition::zigzag: partition = "zigzag_ring"; break;
    case Partition::stripe: partition = sparse ? "balanced_sparse_ring" : "stripe_ring"; break;
    case Partition::balanced: partition = "balanced_partition_ring"; break;
  }
  std::string ring = p.ring == RingKind::hierarchical ? "hierarchical_"
                     : p.ring == RingKind::double_ring ? "double_ring_" : "";
  return (p.hp > 1 ? "2d_" : "") + ring + partition;
}

}  // namespace rm::generate
