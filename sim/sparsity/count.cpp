#include "sim/sparsity/count.hpp"

#include <stdexcept>

#include "sim/sparsity/aligned_count.hpp"
#include "sim/sparsity/block_count.hpp"
#include "sim/sparsity/block_owners.hpp"
#include "sim/sparsity/dense_count.hpp"
#include "sim/sparsity/general_count.hpp"

namespace rm::sparsity {

namespace {

void check_shape(BlockShape s) {
  if (s.bq < 1 || s.bk < 1) throw std::invalid_argument("BlockShape: bq and bk must be >= 1");
}

// The aligned layout of (query sets, key sets), or null when the aligned
// path does not apply. pair_costs is called once per head with the same
// ranks, so the last layout is kept (valid until the next call).
const AlignedLayout* aligned_owners(const HeadPattern& p, const std::vector<TokenSet>& q,
                                            const std::vector<TokenSet>& k, BlockShape s) {
  if (!aligned_supported(p, s)) return nullptr;
  struct Last {
    std::vector<TokenSet> q, k;
    int64_t bq = 0, bk = 0;
    std::optional<AlignedLayout> layout;
  };
  thread_local Last last;
  if (last.bq != s.bq || last.bk != s.bk || last.q != q || last.k != k) {
    auto qo = block_owners(q, s.bq);
    auto ko = block_owners(k, s.bk);
    last = {q, k, s.bq, s.bk, std::nullopt};
    if (qo && ko) last.layout = aligned_layout(std::move(*qo), std::move(*ko), s);
  }
  return last.layout ? &*last.layout : nullptr;
}

}  // namespace

TileCost count(const HeadPattern& p, const TokenSet& q, const TokenSet& k, BlockShape shape) {
  check_shape(shape);
  if (p.dense_family()) return dense_count(p, q, k, shape);
  if (block_unit(p)) return block_costs(p, {q}, {k}, shape)[0];
  if (auto own = aligned_owners(p, {q}, {k}, shape)) return aligned_costs(p, *own, shape)[0];
  return general_count(p, cut_tiles(q, shape.bq), cut_tiles(k, shape.bk));
}

std::vector<TileCost> pair_costs(const HeadPattern& p, const std::vector<TokenSet>& ranks, BlockShape shape) {
  check_shape(shape);
  if (p.dense_family()) return dense_pair_costs(p, ranks, shape);
  if (block_unit(p)) return block_costs(p, ranks, ranks, shape);
  if (auto own = aligned_owners(p, ranks, ranks, shape)) return aligned_costs(p, *own, shape);
  std::vector<std::vector<Tile>> qt, kt;
  for (const auto& r : ranks) {
    qt.push_back(cut_tiles(r, shape.bq));
    kt.push_back(cut_tiles(r, shape.bk));
  }
  std::vector<TileCost> out;
  out.reserve(ranks.size() * ranks.size());
  for (const auto& q : qt)
    for (const auto& k : kt) out.push_back(general_count(p, q, k));
  return out;
}

std::vector<TileCost> chunk_row_costs(const HeadPattern& p, int64_t seq_len, int64_t chunk_tokens, BlockShape shape) {
  check_shape(shape);
  if (seq_len < 0 || chunk_tokens < 1) throw std::invalid_argument("chunk_row_costs: need seq_len >= 0, chunk_tokens >= 1");
  if (p.dense_family()) return dense_chunk_row_costs(p, seq_len, chunk_tokens, shape);
  if (aligned_chunk_rows_supported(p, seq_len, chunk_tokens, shape)) return aligned_chunk_row_costs(p, seq_len, chunk_tokens, shape);
  const int64_t chunks = (seq_len + chunk_tokens - 1) / chunk_tokens;
  const TokenSet all{{{0, seq_len, 0, 1}}};
  std::vector<TokenSet> rows;
  for (int64_t c = 0; c < chunks; ++c)
    rows.push_back(TokenSet{{{c * chunk_tokens, std::min(chunk_tokens, seq_len - c * chunk_tokens), 0, 1}}});
  if (block_unit(p)) return block_costs(p, rows, {all}, shape);
  if (auto own = aligned_owners(p, rows, {all}, shape)) return aligned_costs(p, *own, shape);
  const auto keys = cut_tiles(all, shape.bk);
  std::vector<TileCost> out;
  for (const auto& row : rows) out.push_back(general_count(p, cut_tiles(row, shape.bq), keys));
  return out;
}

}  // namespace rm::sparsity
