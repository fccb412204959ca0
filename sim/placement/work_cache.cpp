#include "sim/placement/work_cache.hpp"

#include <algorithm>

#include "sim/config/parallel_for.hpp"
#include "sim/placement/context_partition.hpp"

namespace rm::placement {

size_t WorkCache::intern(const std::vector<sparsity::TokenSet>& ranks) {
  // Few distinct partitions per session: a scan by value is enough, and it lets
  // a partition handed in from outside share entries with an equal cached one.
  for (size_t i = 0; i < partitions_.size(); ++i)
    if (&partitions_[i] == &ranks) return i;
  const auto it = std::find(partitions_.begin(), partitions_.end(), ranks);
  if (it != partitions_.end()) return size_t(it - partitions_.begin());
  partitions_.push_back(ranks);
  return partitions_.size() - 1;
}

const std::vector<sparsity::TokenSet>& WorkCache::partition(Partition p, const Experiment& e,
                                                            const sparsity::SparsityModel& m) {
  const bool balanced = p == Partition::balanced;
  const PartitionKey key{p,
                         e.workload.seq_len,
                         e.parallel.cp,
                         e.parallel.stripe_tokens,
                         balanced ? &m : nullptr,
                         balanced ? e.workload.block_q : 0,
                         balanced ? e.workload.block_k : 0};
  auto it = by_partition_.find(key);
  if (it == by_partition_.end()) {
    ++partition_builds_;
    it = by_partition_.emplace(key, intern(partition_for(p, e, m))).first;
  }
  return partitions_[it->second];
}

const std::vector<sparsity::TileCost>& WorkCache::pair_costs(const sparsity::HeadPattern& p,
                                                             const std::vector<sparsity::TokenSet>& ranks,
                                                             sparsity::BlockShape shape) {
  const PairKey key{&p, intern(ranks), shape.bq, shape.bk};
  auto it = pairs_.find(key);
  if (it == pairs_.end()) {
    ++pair_cost_builds_;
    it = pairs_.emplace(key, sparsity::pair_costs(p, ranks, shape)).first;
    matrix_bytes_ += static_cast<int64_t>(it->second.size() * sizeof(sparsity::TileCost));
  }
  return it->second;
}

std::vector<sparsity::TileCost> WorkCache::head_rank_pairs(const sparsity::SparsityModel& m, int layer,
                                                           const HeadShard& hs,
                                                           const std::vector<sparsity::TokenSet>& ranks,
                                                           sparsity::BlockShape shape) {
  const size_t n = ranks.size() * ranks.size();
  const auto bytes = static_cast<int64_t>(n * sizeof(sparsity::TileCost));
  const size_t id = intern(ranks);
  std::vector<sparsity::TileCost> sum(n);
  // The shard's distinct patterns not counted yet, in head order, are counted
  // first, on threads_ threads (each into its own slot: the counts do not
  // depend on the thread count); then kept or not, and summed, in head order.
  std::vector<const sparsity::HeadPattern*> missing;
  for (int h = hs.first_head; h < hs.first_head + hs.heads; ++h) {
    const sparsity::HeadPattern* p = &m.head(layer, h);
    if (!pairs_.contains(PairKey{p, id, shape.bq, shape.bk}) && std::find(missing.begin(), missing.end(), p) == missing.end())
      missing.push_back(p);
  }
  std::vector<std::vector<sparsity::TileCost>> counted(missing.size());
  parallel_for(missing.size(), threads_,
               [&](size_t i) { counted[i] = sparsity::pair_costs(*missing[i], partitions_[id], shape); });
  // Over budget, a shard's distinct patterns are counted once for this call only.
  std::map<const sparsity::HeadPattern*, std::vector<sparsity::TileCost>> local;
  for (size_t i = 0; i < missing.size(); ++i) {
    ++pair_cost_builds_;
    if (matrix_bytes_ + bytes <= matrix_budget_) {
      pairs_.emplace(PairKey{missing[i], id, shape.bq, shape.bk}, std::move(counted[i]));
      matrix_bytes_ += bytes;
    } else {
      local.emplace(missing[i], std::move(counted[i]));
    }
  }
  for (int h = hs.first_head; h < hs.first_head + hs.heads; ++h) {
    const sparsity::HeadPattern* p = &m.head(layer, h);
    const auto it = pairs_.find(PairKey{p, id, shape.bq, shape.bk});
    const std::vector<sparsity::TileCost>& c = it != pairs_.end() ? it->second : local.at(p);
    for (size_t i = 0; i < n; ++i) sum[i] += c[i];
  }
  return sum;
}

}  // namespace rm::placement
