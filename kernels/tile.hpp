#pragma once
// What one attention tile is: the query rows and key/value rows a rank holds
// at one ring step, each row tagged with its GLOBAL token position (ring
// partitions such as stripe and zigzag make local rows non-contiguous), and
// the sparse index that says which (query, key) pairs attend. The mask
// semantics live here, in one place, for the CPU and CUDA kernels and tests.
#include <cstdint>
#include <string>
#include <vector>

namespace rm::kernels {

// Granularity of the sparse index in global tokens: MTraining turns slashes
// into a block mask at 128 tokens, and block masks use the same blocks.
inline constexpr std::int32_t kIndexBlock = 128;

struct TileShape {
  int heads_q = 0;    // query heads
  int heads_kv = 0;   // key/value heads; heads_q is a multiple (GQA)
  int head_dim = 0;   // 64 or 128
  int rows_q = 0;     // query rows in this tile
  int rows_k = 0;     // key/value rows in this tile
};

// Where each local row sits in the global sequence.
struct TileLayout {
  std::vector<std::int32_t> q_pos;  // rows_q global positions
  std::vector<std::int32_t> k_pos;  // rows_k global positions, no repeats in sparse modes
  std::int32_t seq_len = 0;         // every position is < seq_len
  bool causal = true;               // key attends only if k_pos <= q_pos
};

enum class SparseMode { dense, vertical_slash, block_mask };

// MTraining's pattern for one query head. Slashes act at block granularity:
// global block pair (qb, kb) is computed if some slash offset d satisfies
// |d - (qb-kb)*128| < 128, i.e. the diagonal q-k=d crosses that block.
struct VerticalSlash {
  std::vector<std::int32_t> verticals;  // sorted unique global key positions
  std::vector<std::int32_t> slashes;    // sorted unique offsets q-k >= 0
};

// Explicit block mask for one query head: rows[qb] lists, sorted and unique,
// the global key blocks that query block qb attends.
struct BlockMask {
  std::vector<std::vector<std::int32_t>> rows;  // ceil(seq_len/128) rows
};

struct SparseIndex {
  SparseMode mode = SparseMode::dense;
  std::vector<VerticalSlash> vertical_slash;  // one per query head (vertical_slash mode)
  std::vector<BlockMask> block_mask;          // one per query head (block_mask mode)
};

inline std::int32_t index_block(std::int32_t pos) { return pos / kIndexBlock; }
inline std::int32_t index_blocks(std::int32_t seq_len) { return (seq_len + kIndexBlock - 1) / kIndexBlock; }

// True when global block pair (qb, kb) of `head` is selected by the index's
// blocks (slash blocks or mask); dense selects every block.
bool block_selected(const SparseIndex& index, int head, std::int32_t qb, std::int32_t kb);

// The exact mask: does query position qp attend key position kp in `head`?
bool attends(const SparseIndex& index, int head, std::int32_t qp, std::int32_t kp, bool causal);

// Throw std::invalid_argument naming what is wrong: shape (head counts,
// head dim 64/128), layout (sizes, positions in [0, seq_len)), index (head
// count, indices sorted, unique and in range).
void validate_tile(const TileShape& shape, const TileLayout& layout, const SparseIndex& index);

std::string to_string(SparseMode mode);

}  // namespace rm::kernels
