// Which tokens each context-parallel rank owns.
//   contiguous  rank r holds [r*S/cp, (r+1)*S/cp)
//   zigzag      2*cp chunks, rank r holds chunks r and 2cp-1-r (Megatron CP, LoongTrain)
//   stripe      g-token chunks dealt round robin: chunk b goes to rank b mod cp (MTraining, g = 128)
//   balanced    ours: stripe chunks, but each period of cp chunks is dealt forward or
//               backward, chosen greedily so per-rank work (from the sparsity model)
//               stays even; docs/imbalance.md ("Partitions") says where it wins and loses.
// A context rank's head group then splits its tokens further: sequence_shard().
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::placement {

using sparsity::TokenSet;

std::vector<TokenSet> contiguous_partition(int64_t seq_len, int cp);
std::vector<TokenSet> zigzag_partition(int64_t seq_len, int cp);
std::vector<TokenSet> stripe_partition(int64_t seq_len, int cp, int64_t chunk_tokens);
// period_reversed[p] says whether period p (chunks p*cp .. p*cp+cp-1) is dealt backward.
std::vector<TokenSet> periodic_partition(int64_t seq_len, int cp, int64_t chunk_tokens,
                                         const std::vector<bool>& period_reversed);
// Chooses each period's direction greedily (heaviest-spread periods first) so the
// maximum per-rank sum of chunk_work is as small as it can make it.
std::vector<bool> balance_periods(const std::vector<double>& chunk_work, int cp);

// The partition an experiment names, except `balanced`, which needs chunk work
// (sim/placement/context_partition.hpp).
std::vector<TokenSet> simple_partition(Partition p, int64_t seq_len, int cp, int64_t stripe_tokens);

// The part of a context rank's tokens held by head rank h of its head group
// before the head all-to-all: the h-th of hp equal slices, in local order.
TokenSet sequence_shard(const TokenSet& context_tokens, int hp, int h);

}  // namespace rm::placement
