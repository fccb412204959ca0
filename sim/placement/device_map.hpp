// Which GPU holds which (data-parallel, head-parallel, context-parallel) rank,
// how heads split over head ranks, and the ring orders attention uses.
//   head_first     head groups are consecutive GPUs: gpu = d*hp*cp + c*hp + h
//                  (the head all-to-all stays on NVLink; outer-ring transfers use every NIC)
//   context_first  context groups are consecutive GPUs: gpu = d*hp*cp + h*cp + c
//   interleaved    context_first, with double-ring windows taken from alternating
//                  context ranks (LoongTrain: cp = 16, w = 4 -> [0,2,4,6] [1,3,5,7] [8,..] [9,..])
#pragma once

#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/topology/topology.hpp"

namespace rm {

struct HeadShard {
  int first_head = 0, heads = 0;        // query heads of this head rank
  int first_kv_head = 0, kv_heads = 0;  // KV heads it needs
  bool kv_replicated = false;           // hp > kv_heads: several head ranks hold copies of one KV head
};
HeadShard head_shard(const Model& m, int hp, int h);

class DeviceMap {
 public:
  DeviceMap(const Parallel& p);
  int gpu(int d, int h, int c) const;
  std::vector<int> context_group(int d, int h) const;  // GPUs in context-rank order
  std::vector<int> head_group(int d, int c) const;     // GPUs in head-rank order
  std::vector<int> data_group(int h, int c) const;

 private:
  Parallel p_;
};

// Double-ring windows over context ranks 0..cp-1: cp/w windows of w ranks each.
std::vector<std::vector<int>> double_ring_windows(int cp, int w, bool interleaved);

// Node-local inner rings of a context group (positions into `group_gpus`), and the
// outer rings that join the same inner position across nodes. Every inner ring has
// the same size (throws otherwise: the group does not tile the nodes evenly).
struct RingHierarchy {
  std::vector<std::vector<int>> inner;  // inner[o] = context ranks on the o-th node, in order
  int inner_size() const { return inner.empty() ? 0 : int(inner[0].size()); }
  int outer_size() const { return int(inner.size()); }
};
RingHierarchy node_local_rings(const std::vector<int>& group_gpus, const Topology& topo);

// The KV source of every context rank at every ring step: src[k][r] is the context
// rank whose K/V rank r attends to at step k (step 0 is its own). Follows the order
// in which each ring kind visits KV blocks.
std::vector<std::vector<int>> ring_sources(RingKind kind, int cp, int window, bool interleaved,
                                           const RingHierarchy* hierarchy);

}  // namespace rm
