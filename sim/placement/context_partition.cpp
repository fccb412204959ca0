#include "sim/placement/context_partition.hpp"

#include <map>

#include "sim/placement/token_partition.hpp"
#include "sim/sparsity/count.hpp"

namespace rm::placement {

std::vector<sparsity::TokenSet> partition_for(Partition p, const Experiment& e, const sparsity::SparsityModel& m) {
  const auto& P = e.parallel;
  const int64_t S = e.workload.seq_len;
  if (p != Partition::balanced) return simple_partition(p, S, P.cp, P.stripe_tokens);
  const int64_t chunks = S / P.stripe_tokens;
  std::vector<double> work(static_cast<size_t>(chunks), 0.0);
  const sparsity::BlockShape shape{e.workload.block_q, e.workload.block_k};
  // Heads with one mask share one pattern object: count it once, weigh it by its heads.
  std::map<const sparsity::HeadPattern*, int> heads;
  for (int l = 0; l < m.layers(); ++l)
    for (int h = 0; h < m.heads(); ++h) ++heads[&m.head(l, h)];
  for (const auto& [pattern, n] : heads) {
    const auto c = sparsity::chunk_row_costs(*pattern, S, P.stripe_tokens, shape);
    for (size_t i = 0; i < c.size(); ++i) work[i] += double(n) * double(c[i].blocks);
  }
  return periodic_partition(S, P.cp, P.stripe_tokens, balance_periods(work, P.cp));
}

}  // namespace rm::placement
