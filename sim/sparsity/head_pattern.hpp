// One attention head's mask, held compactly so that it can be counted
// exactly without materialising S x S. Every kind is one predicate:
//   allowed(q, k) = (k <= q or not causal)  and  same document  and
//                   (k in verticals  or  floor(q/u) - floor(k/u) in slashes)
// with slash unit u = 1 (token diagonals: dense, sliding window, A-shape) or
// u = a block (block diagonals). Vertical-slash heads are held as the sparse
// kernel executes them (MTraining's and kernels/): a slash offset d selects
// every u-block pair it crosses, |d - (qb - kb)·u| < u, so slashes() holds
// block diagonals and slash_offsets() the token offsets they came from.
// Dense causal is "every offset", a sliding window offsets [0, w), A-shape
// adds sink columns. Only the dense family (dense and document masks) may be
// non-causal; it is counted by closed forms (dense_count.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/sparsity/interval_set.hpp"

namespace rm::sparsity {

// The sparse kernels' index block: MTraining's 128-token granularity, kernels::kIndexBlock.
inline constexpr int64_t kSlashBlock = 128;

enum class PatternKind {
  dense_causal, vertical_slash, block_sparse, sliding_window, a_shape, document_causal, dense_full, document_full
};
std::string to_string(PatternKind k);

class HeadPattern {
 public:
  static HeadPattern dense_causal();
  // verticals: key token positions; slash_offsets: offsets q - k >= 0, made
  // block diagonals of block_tokens (the kernel's index block; tests use small ones).
  static HeadPattern vertical_slash(IntervalSet verticals, IntervalSet slash_offsets, int64_t block_tokens = kSlashBlock);
  static HeadPattern sliding_window(int64_t window_tokens);
  static HeadPattern a_shape(int64_t sink_tokens, int64_t window_tokens);
  // Columns and diagonals counted in blocks of block_tokens (both sides).
  static HeadPattern block_sparse(int64_t block_tokens, const IntervalSet& block_columns, IntervalSet block_diagonals);
  // Causal inside each document; doc_starts sorted, first is 0.
  static HeadPattern document_causal(std::vector<int64_t> doc_starts);
  // Every (query, key) pair: bidirectional attention.
  static HeadPattern dense_full();
  // Every pair inside each document (bidirectional within a document).
  static HeadPattern document_full(std::vector<int64_t> doc_starts);

  PatternKind kind() const { return kind_; }
  bool causal() const { return causal_; }
  // Dense or document masks, causal or full: no verticals, every offset.
  bool dense_family() const;
  const IntervalSet& verticals() const { return verticals_; }
  const IntervalSet& slashes() const { return slashes_; }
  const IntervalSet& slash_offsets() const { return offsets_; }  // vertical_slash: the token offsets
  int64_t slash_unit() const { return unit_; }
  const std::vector<int64_t>& doc_starts() const { return docs_; }  // empty: one document
  bool allowed(int64_t q, int64_t k) const;
  // Same mask, field by field (what lets equal heads share one object and one count).
  bool operator==(const HeadPattern&) const = default;
  uint64_t hash() const;  // of every field: equal patterns hash equal

 private:
  PatternKind kind_ = PatternKind::dense_causal;
  bool causal_ = true;
  IntervalSet verticals_;
  IntervalSet slashes_;
  IntervalSet offsets_;
  int64_t unit_ = 1;
  std::vector<int64_t> docs_;
};

}  // namespace rm::sparsity
