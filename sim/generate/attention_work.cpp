#include "sim/generate/attention_work.hpp"

#include "sim/placement/device_map.hpp"

namespace rm::generate {

AttentionWork::AttentionWork(const sparsity::SparsityModel& patterns, const Model& model, int hp,
                             std::vector<sparsity::TokenSet> context_tokens, sparsity::BlockShape shape)
    : patterns_(patterns), model_(model), hp_(hp), tokens_(std::move(context_tokens)), shape_(shape) {}

const std::vector<sparsity::TileCost>& AttentionWork::pairs(int layer, int h) {
  auto key = std::make_pair(layer, h);
  if (auto it = by_rank_.find(key); it != by_rank_.end()) return it->second;
  const HeadShard shard = head_shard(model_, hp_, h);
  std::vector<sparsity::TileCost> sum(tokens_.size() * tokens_.size());
  for (int head = shard.first_head; head < shard.first_head + shard.heads; ++head) {
    const sparsity::HeadPattern& p = patterns_.head(layer, head);
    auto it = by_pattern_.find(&p);
    if (it == by_pattern_.end()) it = by_pattern_.emplace(&p, sparsity::pair_costs(p, tokens_, shape_)).first;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += it->second[i];
  }
  return by_rank_.emplace(key, std::move(sum)).first->second;
}

bool AttentionWork::sparse() const {
  for (int l = 0; l < model_.layers; ++l)
    for (int head = 0; head < model_.heads; ++head)
      if (patterns_.head(l, head).kind() != sparsity::PatternKind::dense_causal) return true;
  return false;
}

}  // namespace rm::generate
