#include "sim/generate/attention_work.hpp"

namespace rm::generate {

AttentionWork::AttentionWork(const Experiment& e, const sparsity::SparsityModel& patterns,
                             placement::WorkCache* cache)
    : own_(cache ? nullptr : std::make_unique<placement::WorkCache>()),
      cache_(cache ? cache : own_.get()),
      patterns_(patterns),
      model_(e.model),
      head_ranks_(e.parallel.hp * e.parallel.tp),
      shape_{e.workload.block_q, e.workload.block_k},
      tokens_(cache_->partition(e.parallel.partition, e, patterns)) {}

const std::vector<sparsity::TileCost>& AttentionWork::pairs(int layer, int a) {
  const auto key = std::make_pair(layer, a);
  if (auto it = by_rank_.find(key); it != by_rank_.end()) return it->second;
  return by_rank_.emplace(key, cache_->head_rank_pairs(patterns_, layer, placement::head_shard(model_, head_ranks_, a), tokens_, shape_))
      .first->second;
}

}  // namespace rm::generate
