// Which GPU holds which (data-parallel, head-parallel, context-parallel) rank,
// and how heads split over head ranks. Ring layouts: attention_kind.hpp.
//   head_first     head groups are consecutive GPUs: gpu = d*hp*cp + c*hp + h
//                  (the head all-to-all stays on NVLink; outer-ring transfers use every NIC)
//   context_first  context groups are consecutive GPUs: gpu = d*hp*cp + h*cp + c
//   interleaved    context_first; double-ring windows then take alternating context
//                  ranks (double_ring_attention.cpp)
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

class DeviceMap {
 public:
  DeviceMap(const Parallel& p);
  int gpu(int d, int h, int c) const;
  std::vector<int> context_group(int d, int h) const;  // GPUs in context-rank order
  std::vector<int> head_group(int d, int c) const;     // GPUs in head-rank order

 private:
  Parallel p_;
};

}  // namespace rm::placement
