#include "sim/sparsity/head_pattern.hpp"

#include <algorithm>
#include <stdexcept>

namespace rm::sparsity {

std::string to_string(PatternKind k) {
  switch (k) {
    case PatternKind::dense_causal: return "dense_causal";
    case PatternKind::vertical_slash: return "vertical_slash";
    case PatternKind::block_sparse: return "block_sparse";
    case PatternKind::sliding_window: return "sliding_window";
    case PatternKind::a_shape: return "a_shape";
    case PatternKind::document_causal: return "document_causal";
    case PatternKind::dense_full: return "dense_full";
    case PatternKind::document_full: return "document_full";
  }
  return "?";
}

HeadPattern HeadPattern::dense_causal() {
  HeadPattern p;
  p.slashes_ = IntervalSet({{0, kUnbounded}});
  return p;
}

HeadPattern HeadPattern::vertical_slash(IntervalSet verticals, IntervalSet slash_offsets, int64_t block_tokens) {
  if (block_tokens < 1) throw std::invalid_argument("vertical_slash: block_tokens must be >= 1");
  HeadPattern p;
  p.kind_ = PatternKind::vertical_slash;
  p.unit_ = block_tokens;
  p.verticals_ = verticals.clipped(0, kUnbounded);
  p.offsets_ = slash_offsets.clipped(0, kUnbounded);  // negative offsets are never causal
  // Offsets [lo, hi) cross block diagonals floor(lo/u) .. ceil((hi-1)/u).
  std::vector<Interval> diags;
  for (const auto& d : p.offsets_.intervals()) diags.push_back({d.lo / block_tokens, (d.hi - 1 + block_tokens - 1) / block_tokens + 1});
  p.slashes_ = IntervalSet(std::move(diags));
  return p;
}

HeadPattern HeadPattern::sliding_window(int64_t window_tokens) {
  HeadPattern p;
  p.kind_ = PatternKind::sliding_window;
  p.slashes_ = IntervalSet({{0, window_tokens}});
  return p;
}

HeadPattern HeadPattern::a_shape(int64_t sink_tokens, int64_t window_tokens) {
  HeadPattern p;
  p.kind_ = PatternKind::a_shape;
  p.verticals_ = IntervalSet({{0, sink_tokens}});
  p.slashes_ = IntervalSet({{0, window_tokens}});
  return p;
}

HeadPattern HeadPattern::block_sparse(int64_t block_tokens, const IntervalSet& block_columns,
                                      IntervalSet block_diagonals) {
  if (block_tokens < 1) throw std::invalid_argument("block_sparse: block_tokens must be >= 1");
  HeadPattern p;
  p.kind_ = PatternKind::block_sparse;
  p.unit_ = block_tokens;
  std::vector<Interval> cols;
  const IntervalSet in_range = block_columns.clipped(0, kUnbounded / block_tokens);
  for (const auto& c : in_range.intervals())
    cols.push_back({c.lo * block_tokens, c.hi * block_tokens});
  p.verticals_ = IntervalSet(std::move(cols));
  p.slashes_ = block_diagonals.clipped(0, kUnbounded);
  return p;
}

namespace {

std::vector<int64_t> checked_starts(std::vector<int64_t> doc_starts, const char* who) {
  if (doc_starts.empty() || doc_starts.front() != 0 || !std::is_sorted(doc_starts.begin(), doc_starts.end()))
    throw std::invalid_argument(std::string(who) + ": doc_starts must be sorted and start at 0");
  doc_starts.erase(std::unique(doc_starts.begin(), doc_starts.end()), doc_starts.end());
  return doc_starts;
}

}  // namespace

HeadPattern HeadPattern::document_causal(std::vector<int64_t> doc_starts) {
  HeadPattern p = dense_causal();
  p.kind_ = PatternKind::document_causal;
  p.docs_ = checked_starts(std::move(doc_starts), "document_causal");
  return p;
}

HeadPattern HeadPattern::dense_full() {
  HeadPattern p = dense_causal();
  p.kind_ = PatternKind::dense_full;
  p.causal_ = false;
  return p;
}

HeadPattern HeadPattern::document_full(std::vector<int64_t> doc_starts) {
  HeadPattern p = dense_full();
  p.kind_ = PatternKind::document_full;
  p.docs_ = checked_starts(std::move(doc_starts), "document_full");
  return p;
}

bool HeadPattern::dense_family() const {
  return kind_ == PatternKind::dense_causal || kind_ == PatternKind::dense_full ||
         kind_ == PatternKind::document_causal || kind_ == PatternKind::document_full;
}

bool HeadPattern::allowed(int64_t q, int64_t k) const {
  if (k < 0 || q < 0 || (causal_ && k > q)) return false;
  if (!docs_.empty()) {
    auto doc = [&](int64_t t) { return std::upper_bound(docs_.begin(), docs_.end(), t) - docs_.begin(); };
    if (doc(q) != doc(k)) return false;
  }
  if (!causal_) return true;  // only the dense family is non-causal: every offset, both ways
  return verticals_.contains(k) || slashes_.contains(q / unit_ - k / unit_);
}

uint64_t HeadPattern::hash() const {
  uint64_t h = 14695981039346656037ull;  // FNV-1a over the fields
  auto mix = [&](int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull; };
  mix(static_cast<int64_t>(kind_)), mix(causal_), mix(unit_);
  for (const IntervalSet* set : {&verticals_, &slashes_, &offsets_}) {
    mix(static_cast<int64_t>(set->intervals().size()));
    for (const auto& i : set->intervals()) mix(i.lo), mix(i.hi);
  }
  mix(static_cast<int64_t>(docs_.size()));
  for (int64_t d : docs_) mix(d);
  return h;
}

}  // namespace rm::sparsity
