#include "runtime/pattern_index.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

namespace rm::runtime {
namespace {

using sparsity::HeadPattern;
using sparsity::IntervalSet;
using sparsity::PatternKind;

constexpr int32_t kBlock = kernels::kIndexBlock;

// Every integer of `set` inside [0, limit), ascending.
std::vector<int32_t> points(const IntervalSet& set, int64_t limit) {
  std::vector<int32_t> out;
  const IntervalSet inside = set.clipped(0, limit);  // named: the loop must not outlive a temporary
  for (const auto& iv : inside.intervals())
    for (int64_t x = iv.lo; x < iv.hi; ++x) out.push_back(static_cast<int32_t>(x));
  return out;
}

kernels::VerticalSlash vertical_slash(const HeadPattern& p, int32_t seq_len) {
  kernels::VerticalSlash vs{points(p.verticals(), seq_len), points(p.slash_offsets(), seq_len)};
  // The kernels take offsets below seq_len. An offset d in [seq_len, 128 *
  // blocks) still crosses the last block diagonal (blocks - 1) when seq_len is
  // not a multiple of 128, and so does the offset 128 * (blocks - 1), alone:
  // keep that diagonal with it (beyond 128 * blocks nothing is crossed).
  const int64_t last = int64_t(kernels::index_blocks(seq_len) - 1) * kBlock;
  if (p.slash_offsets().count_in(seq_len, last + kBlock) > 0) {
    vs.slashes.push_back(static_cast<int32_t>(last));
    std::sort(vs.slashes.begin(), vs.slashes.end());
    vs.slashes.erase(std::unique(vs.slashes.begin(), vs.slashes.end()), vs.slashes.end());
  }
  return vs;
}

// A block-sparse head of unit u (a multiple of 128) as 128-block rows: kernel
// block pair (qb, kb) lies inside unit pair (qb*128/u, kb*128/u), selected
// by a unit diagonal or a column; blocks after the query block hold no causal
// pair and are left out.
kernels::BlockMask block_mask(const HeadPattern& p, int32_t seq_len) {
  const int64_t per_unit = p.slash_unit() / kBlock;
  kernels::BlockMask m;
  m.rows.resize(static_cast<size_t>(kernels::index_blocks(seq_len)));
  for (int32_t qb = 0; qb < static_cast<int32_t>(m.rows.size()); ++qb)
    for (int32_t kb = 0; kb <= qb; ++kb)
      if (p.verticals().contains(int64_t(kb) * kBlock) || p.slashes().contains(qb / per_unit - kb / per_unit))
        m.rows[static_cast<size_t>(qb)].push_back(kb);
  return m;
}

}  // namespace

sparsity::SparsityModel pattern_model(const rm::Experiment& e) {
  // The context pipeline::build_patterns gives the model (the runtime may not link the pipeline).
  const sparsity::PatternContext ctx{e.model.layers, e.model.heads, e.model.kv_heads, e.workload.seq_len,
                                     e.workload.seed, e.workload.pattern_base_dir};
  return sparsity::build_sparsity(e.workload.pattern, e.workload.pattern_source, ctx);
}

kernels::SparseIndex pattern_index(const sparsity::SparsityModel& m, int layer, const std::string& where) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(fmt::format("{}: $.workload.pattern: pattern {}: {}", where, m.name(), what));
  };
  if (layer < 0 || layer >= m.layers()) fail(fmt::format("layer {} is outside the model's 0..{}", layer, m.layers() - 1));
  if (m.seq_len() > std::numeric_limits<int32_t>::max())
    fail(fmt::format("seq_len {} is beyond the kernels' 32-bit positions", m.seq_len()));
  const auto S = static_cast<int32_t>(m.seq_len());
  const PatternKind kind = m.head(layer, 0).kind();
  if (m.dynamic())
    fail(fmt::format("is dynamic ({} heads): its index is built at run time by the Schedule's index_build ops, "
                     "expected a static pattern", sparsity::to_string(kind)));
  for (int h = 1; h < m.heads(); ++h)
    if (m.head(layer, h).kind() != kind)
      fail(fmt::format("layer {} mixes {} and {} heads: expected one kind per layer", layer, sparsity::to_string(kind),
                       sparsity::to_string(m.head(layer, h).kind())));

  kernels::SparseIndex index;
  switch (kind) {
    case PatternKind::dense_causal:
    case PatternKind::dense_full:
      return index;  // dense; pattern_causal says which
    case PatternKind::vertical_slash:
      index.mode = kernels::SparseMode::vertical_slash;
      for (int h = 0; h < m.heads(); ++h) {
        const HeadPattern& p = m.head(layer, h);
        if (p.slash_unit() != kBlock)
          fail(fmt::format("vertical_slash heads of {}-token blocks: expected the kernels' {}-token index block",
                           p.slash_unit(), kBlock));
        index.vertical_slash.push_back(vertical_slash(p, S));
      }
      return index;
    case PatternKind::block_sparse:
      index.mode = kernels::SparseMode::block_mask;
      for (int h = 0; h < m.heads(); ++h) {
        const HeadPattern& p = m.head(layer, h);
        if (p.slash_unit() % kBlock != 0)
          fail(fmt::format("block_sparse heads of block_tokens {}: expected a multiple of the kernels' {}-token "
                           "index block", p.slash_unit(), kBlock));
        index.block_mask.push_back(block_mask(p, S));
      }
      return index;
    case PatternKind::sliding_window:
    case PatternKind::a_shape:
    case PatternKind::document_causal:
    case PatternKind::document_full:
      break;
  }
  fail(fmt::format("{} heads cannot run exactly on the kernels' index (it selects whole {}-token blocks and knows no "
                   "documents): expected dense_causal, dense_full, vertical_slash or block_sparse",
                   sparsity::to_string(kind), kBlock));
  return index;  // not reached: fail throws
}

kernels::SparseIndex pattern_index(const rm::Experiment& e, int layer) {
  return pattern_index(pattern_model(e), layer, e.source);
}

bool pattern_causal(const rm::Experiment& e) { return pattern_model(e).causal(); }

}  // namespace rm::runtime
