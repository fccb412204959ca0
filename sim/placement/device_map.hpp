// Which GPU holds which (data-parallel, head-parallel, context-parallel,
// tensor-parallel) rank, and how heads split over head and tensor ranks.
// Ring layouts: attention_kind.hpp.
// A (d, h, c) rank is a tensor-parallel group of tp consecutive GPUs (tp divides
// the GPUs per node, so the group never leaves its node): gpu = base(d, h, c)*tp + t, with
//   head_first     head groups are consecutive: base = d*hp*cp + c*hp + h
//                  (the head all-to-all stays on NVLink; outer-ring transfers use every NIC)
//   context_first  context groups are consecutive: base = d*hp*cp + h*cp + c
//   interleaved    context_first; double-ring windows then take alternating context
//                  ranks (double_ring_attention.cpp)
// With tp = 1 this is the (d, h, c) map it always was.
#pragma once

#include <vector>

#include "sim/config/experiment.hpp"

namespace rm::placement {

struct HeadShard {
  int first_head = 0, heads = 0;        // query heads of this head rank
  int first_kv_head = 0, kv_heads = 0;  // KV heads it needs
  bool kv_replicated = false;           // hp > kv_heads: several head ranks hold copies of one KV head
};
HeadShard head_shard(const Model& m, int hp, int h);
// The heads of head rank h on tensor rank t: Megatron gives tp rank t the t-th
// tp-th of the heads (and of the KV heads), the head all-to-all splits those over hp.
// The shard of attention-head rank t*hp + h of hp*tp.
HeadShard head_shard(const Model& m, const Parallel& p, int h, int t);

class DeviceMap {
 public:
  DeviceMap(const Parallel& p);
  int gpu(int d, int h, int c, int t) const;
  std::vector<int> context_group(int d, int h, int t) const;  // GPUs in context-rank order
  std::vector<int> head_group(int d, int c, int t) const;     // GPUs in head-rank order
  std::vector<int> tensor_group(int d, int h, int c) const;   // GPUs in tensor-rank order

 private:
  Parallel p_;
};

}  // namespace rm::placement
