// Which rank holds each global block of B tokens, when every rank's tokens are
// whole aligned blocks. Then a kernel tile cut over a rank's local order is
// exactly one global block, whatever the order of its runs — the premise of
// the aligned counting path.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/sparsity/token_set.hpp"

namespace rm::sparsity {

struct BlockOwners {
  std::vector<int> owner;  // per block; -1 when no rank holds it
  int owners = 0;
};

// nullopt when some run is not made of whole aligned blocks or two sets share a block.
std::optional<BlockOwners> block_owners(const std::vector<TokenSet>& sets, int64_t block);

// Smallest P with owner[x] == owner[x - P] for all x >= P (owner.size() if none).
int64_t owner_period(const std::vector<int>& owner);

struct OwnerSegment {
  int64_t begin = 0;  // first block
  int64_t end = 0;    // one past the last block
  int owner = 0;
};
// Maximal runs of blocks with one owner (blocks nobody holds are left out).
std::vector<OwnerSegment> owner_segments(const std::vector<int>& owner);

}  // namespace rm::sparsity
