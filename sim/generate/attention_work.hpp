// The attention work of every ring step, from the sparsity model: for a layer
// and a head rank, the tiles and allowed pairs of each context rank's queries
// against each context rank's keys, summed over the head rank's heads. The
// partition and the pair costs come from a placement::WorkCache (a session's,
// shared across experiments, or one of its own), so that a full training step
// never counts the same thing twice.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/placement/work_cache.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::generate {

class AttentionWork {
 public:
  // `cache` may be null: the work then counts into a cache of its own.
  AttentionWork(const Experiment& e, const sparsity::SparsityModel& patterns, placement::WorkCache* cache);

  // cp x cp costs, [q_rank * cp + kv_rank], of attention-head rank a's query heads in `layer`:
  // a = t*hp + h, head rank h on tensor rank t (placement::head_shard).
  const std::vector<sparsity::TileCost>& pairs(int layer, int a);
  int cp() const { return int(tokens_.size()); }
  const sparsity::TokenSet& tokens(int c) const { return tokens_[size_t(c)]; }

 private:
  std::unique_ptr<placement::WorkCache> own_;
  placement::WorkCache* cache_;
  const sparsity::SparsityModel& patterns_;
  Model model_;
  int head_ranks_;  // hp * tp
  sparsity::BlockShape shape_;
  const std::vector<sparsity::TokenSet>& tokens_;  // held by the cache
  std::map<std::pair<int, int>, std::vector<sparsity::TileCost>> by_rank_;
};

}  // namespace rm::generate
