// Test oracle: the tiles MTraining's sparse ring kernel executes, counted from
// the logic of its public code (microsoft/MInference: minference/ops/op_utils/
// vertical_slash_utils.py `_calc_block_mask_kernel` and
// `_striped_convert_indices_kernel`, `convert_blockmask`; the Triton kernel
// `_triton_block_bar_attn_fwd_kernel` in pit_sparse_flash_attention_v3_triton.py),
// re-derived here in its own terms (global/local block indices, "last row"
// mask shifted per query block), not in the model's.
#pragma once

#include <cstdint>
#include <vector>

namespace rm::sparsity::mtraining {

inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Stripe layout (global block b of 128 tokens on rank b mod W). Query blocks
// of `rank` (one Triton program each, 128 query rows) against the K/V of
// `owner`: every block of the shifted last-row mask runs as two 64-column
// tiles (convert_blockmask, ratio 128/64); the bar (vertical) columns of
// that owner not inside a masked block and in key blocks up to the query's
// run as ceil(count / 64) gathered tiles.
// verticals: global key positions, sorted; slashes: offsets q - k, sorted.
inline int64_t stripe_tiles(const std::vector<int64_t>& verticals, const std::vector<int64_t>& slashes, int world,
                            int rank, int owner, int64_t seq_len) {
  const int64_t g = 128, nbg = seq_len / g, nbl = nbg / world, n = nbg * g;
  std::vector<char> last_row(static_cast<size_t>(nbg), 0);  // key blocks the last query block attends
  for (int64_t s : slashes) {
    const int64_t left = floor_div(n - g - s, g), right = floor_div(n - 1 - s, g);
    for (int64_t j = std::max<int64_t>(left, 0); j <= right && j < nbg; ++j) last_row[static_cast<size_t>(j)] = 1;
  }
  // Verticals in the striped order (v_idx after stripe_transform), as (local block of owner, owner).
  int64_t tiles = 0;
  for (int64_t ql = 0; ql < nbl; ++ql) {
    const int64_t qg = ql * world + rank, shift = nbg - 1 - qg;
    auto mask = [&](int64_t kl) {
      const int64_t kg = kl * world + owner;
      return kg + shift < nbg && last_row[static_cast<size_t>(kg + shift)] != 0;
    };
    for (int64_t kl = 0; kl < nbl; ++kl) tiles += 2 * mask(kl);
    const int64_t max_blocks = owner <= rank ? ql + 1 : ql;
    int64_t bars = 0;
    for (int64_t v : verticals) {
      const int64_t b = v / g;
      if (b % world != owner) continue;
      const int64_t kl = b / world;
      if (kl < max_blocks && !mask(kl)) ++bars;
    }
    tiles += (bars + 63) / 64;
  }
  return tiles;
}

}  // namespace rm::sparsity::mtraining
