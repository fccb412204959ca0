// The attention schedules as plug-ins behind one interface. Every kind lays a
// context group into rings: rings[o][i] are context ranks, the inner rings
// rings[o] all of one size, KV moving one inner position per ring step and
// one ring (outer position) per inner round; ring_emitter.hpp turns that
// layout into ops. A flat ring is one inner ring; single-GPU attention (and
// Ulysses, after its all-to-all) a ring of one.
//   local        cp = 1: no ring
//   ring         one ring over the context group (any partition)
//   double_ring  LoongTrain: windows of w as inner rings, stride-w outer ring
//   hierarchical MTraining: node-local inner rings, outer ring across nodes
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/topology/topology.hpp"

namespace rm::generate {

struct RingLayout {
  std::vector<std::vector<int>> rings;    // rings[o][i] = context rank
  std::vector<std::vector<int>> sources;  // sources[k][c] = context rank whose K/V c attends to at step k
  int outer() const { return int(rings.size()); }
  int inner() const { return int(rings[0].size()); }
};

class AttentionKind {
 public:
  virtual ~AttentionKind() = default;
  virtual std::string name() const = 0;
  // The layout of one context group, given its GPUs in context-rank order.
  virtual RingLayout layout(const std::vector<int>& group_gpus, const Topology& topo) const = 0;
};

std::unique_ptr<AttentionKind> make_local_attention();
std::unique_ptr<AttentionKind> make_ring_attention();
std::unique_ptr<AttentionKind> make_double_ring_attention(int window, bool interleaved);
std::unique_ptr<AttentionKind> make_hierarchical_ring_attention();

// The kind the experiment's keys select (DESIGN.md: cp = 1 is local, else parallel.ring).
std::unique_ptr<AttentionKind> make_attention_kind(const Experiment& e);

// The schedule's generator name: "single_gpu", "ulysses", "zigzag_ring",
// "balanced_sparse_ring" (stripe on a sparse pattern), "hierarchical_balanced_sparse_ring",
// "2d_double_ring_zigzag", ...
std::string generator_name(const Experiment& e, bool sparse);

}  // namespace rm::generate
