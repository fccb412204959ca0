// How an attention kind lays a context group into rings — the one owner of
// ring layouts (`generate` emits ops from them, `report` measures imbalance
// on them). rings[o][i] are context ranks, the inner rings rings[o] all of
// one size; K/V move one inner position per ring step and one ring (outer
// position) per inner round; sources[k][c] follows from the rings alone
// (layout_of_rings). A flat ring is one inner ring; single-GPU attention (and
// Ulysses, after its head all-to-all) a ring of one.
//   local        cp = 1: no ring
//   ring         one ring over the context group (any partition)
//   double_ring  LoongTrain: windows of w as inner rings, stride-w outer ring
//   hierarchical MTraining: node-local inner rings, outer ring across nodes
// Kinds are registered by name in one table (attention_kinds()); adding one:
// docs/generators.md, "Adding a ring kind".
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/topology/topology.hpp"

namespace rm::placement {

struct RingLayout {
  std::vector<std::vector<int>> rings;    // rings[o][i] = context rank
  std::vector<std::vector<int>> sources;  // sources[k][c] = context rank whose K/V c attends to at step k
  int outer() const { return int(rings.size()); }
  int inner() const { return int(rings[0].size()); }
};

// The layout of `rings`: at step k = so * inner + si, the rank at (o, i) holds
// the K/V of the rank at (o - so, i - si). Throws std::invalid_argument unless
// the rings are non-empty, of one size, and hold every context rank once.
RingLayout layout_of_rings(std::vector<std::vector<int>> rings);

class AttentionKind {
 public:
  virtual ~AttentionKind() = default;
  // The rings of one context group, given its GPUs in context-rank order.
  // Throws rm::ConfigError naming the experiment key when the group cannot be laid out.
  virtual std::vector<std::vector<int>> rings(const std::vector<int>& group_gpus, const topology::Topology& topo) const = 0;
  RingLayout layout(const std::vector<int>& group_gpus, const topology::Topology& topo) const {
    return layout_of_rings(rings(group_gpus, topo));
  }
};

// One row per kind: its name and its factory (which may throw rm::ConfigError);
// the factories live one per file (sim/placement/*_attention.cpp).
struct AttentionKindEntry {
  std::string_view name;
  std::unique_ptr<AttentionKind> (*make)(const Experiment& e);
};
std::span<const AttentionKindEntry> attention_kinds();

// The name of the kind the experiment's keys select: "local" when cp = 1,
// else parallel.ring; and the kind itself, from its row of the table.
std::string_view attention_kind_name(const Experiment& e);
std::unique_ptr<AttentionKind> make_attention_kind(const Experiment& e);

}  // namespace rm::placement
