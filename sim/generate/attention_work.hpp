// The attention work of every ring step, from the sparsity model: for a layer
// and a head rank, the tiles and allowed pairs of each context rank's queries
// against each context rank's keys, summed over the head rank's heads. One
// pair_costs() call per (layer, distinct head pattern), cached, so that a
// full training step never counts the same thing twice.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "sim/config/model.hpp"
#include "sim/sparsity/count.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::generate {

class AttentionWork {
 public:
  AttentionWork(const sparsity::SparsityModel& patterns, const Model& model, int hp,
                std::vector<sparsity::TokenSet> context_tokens, sparsity::BlockShape shape);

  // cp x cp costs, [q_rank * cp + kv_rank], of head rank h's query heads in `layer`.
  const std::vector<sparsity::TileCost>& pairs(int layer, int h);
  // True when some head of the model is not dense causal (a sparse-tile schedule).
  bool sparse() const;
  int cp() const { return int(tokens_.size()); }
  const sparsity::TokenSet& tokens(int c) const { return tokens_[size_t(c)]; }

 private:
  const sparsity::SparsityModel& patterns_;
  Model model_;
  int hp_;
  std::vector<sparsity::TokenSet> tokens_;
  sparsity::BlockShape shape_;
  std::map<std::pair<int, int>, std::vector<sparsity::TileCost>> by_rank_;
  // The sparsity model hands out one object for heads that share a pattern: count it once.
  std::map<const sparsity::HeadPattern*, std::vector<sparsity::TileCost>> by_pattern_;
};

}  // namespace rm::generate
