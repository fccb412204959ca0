// The attention work of context ranks, counted once: token partitions and
// the cp x cp pair costs (computed tiles, allowed pairs) of every pattern
// against a partition. Counting is the model's costliest step, and many
// candidate configurations of one experiment (other ring kinds, placements,
// scopes) share partitions and patterns, so one cache serves them all
// (pipeline::Session holds one; without it, each user makes its own).
// Entries are keyed by the identity of the SparsityModel and HeadPattern
// objects they were counted from: those must outlive the cache.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::placement {

class WorkCache {
 public:
  // partition_for(p, e, m): built once per (p, seq_len, cp, stripe_tokens; for
  // `balanced` also the patterns and the tile shape).
  const std::vector<sparsity::TokenSet>& partition(Partition p, const Experiment& e, const sparsity::SparsityModel& m);
  // sparsity::pair_costs(p, ranks, shape): counted once per (pattern object, ranks, shape).
  const std::vector<sparsity::TileCost>& pair_costs(const sparsity::HeadPattern& p,
                                                    const std::vector<sparsity::TokenSet>& ranks,
                                                    sparsity::BlockShape shape);
  // cp x cp costs, [q_rank * cp + kv_rank], of the query heads of head shard
  // `hs` in `layer`, summed over those heads. Each distinct pattern of the
  // shard is counted once; its matrix is kept for later calls while the kept
  // matrices stay under matrix_budget() bytes (at cp = 1,024 one is 16 MB and
  // a step has 576 distinct ones: keeping all would take 9 GB).
  std::vector<sparsity::TileCost> head_rank_pairs(const sparsity::SparsityModel& m, int layer, const HeadShard& hs,
                                                  const std::vector<sparsity::TokenSet>& ranks,
                                                  sparsity::BlockShape shape);

  // How many partitions and pair_costs() calls were computed (not found): what
  // the cache saves is visible to tests and benchmarks.
  int64_t partition_builds() const { return partition_builds_; }
  int64_t pair_cost_builds() const { return pair_cost_builds_; }
  // Bytes of pair-cost matrices head_rank_pairs may keep (pair_costs() always keeps).
  static constexpr int64_t kDefaultMatrixBudget = int64_t(1) << 30;
  int64_t matrix_budget() const { return matrix_budget_; }
  void set_matrix_budget(int64_t bytes) { matrix_budget_ = bytes; }
  // Threads head_rank_pairs counts a shard's new patterns on (default 1; a sweep's
  // workers keep 1, as they already fill the cores). The counts do not depend on it.
  void set_threads(int threads) { threads_ = threads; }
  int64_t matrix_bytes() const { return matrix_bytes_; }

 private:
  size_t intern(const std::vector<sparsity::TokenSet>& ranks);

  using PartitionKey = std::tuple<Partition, int64_t, int, int64_t, const sparsity::SparsityModel*, int64_t, int64_t>;
  using PairKey = std::tuple<const sparsity::HeadPattern*, size_t, int64_t, int64_t>;
  std::deque<std::vector<sparsity::TokenSet>> partitions_;  // interned; a deque keeps references valid
  std::map<PartitionKey, size_t> by_partition_;
  std::map<PairKey, std::vector<sparsity::TileCost>> pairs_;
  int64_t partition_builds_ = 0;
  int64_t pair_cost_builds_ = 0;
  int64_t matrix_budget_ = kDefaultMatrixBudget;
  int64_t matrix_bytes_ = 0;
  int threads_ = 1;
};

}  // namespace rm::placement
