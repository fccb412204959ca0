// A sorted set of integers stored as disjoint half-open intervals [lo, hi):
// how a head's vertical key columns and slash offsets are held, so a window
// of 100 diagonals or a dense causal mask costs one interval, not 100 or S.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rm::sparsity {

// Large enough for "every offset", small enough that sums never overflow.
inline constexpr int64_t kUnbounded = int64_t(1) << 50;

struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;  // exclusive
  int64_t size() const { return hi - lo; }
  bool operator==(const Interval&) const = default;
};

class IntervalSet {
 public:
  IntervalSet() = default;
  // Any intervals, in any order, overlapping or not; empty ones are dropped.
  explicit IntervalSet(std::vector<Interval> intervals);
  static IntervalSet from_points(std::vector<int64_t> points);

  const std::vector<Interval>& intervals() const { return iv_; }
  bool empty() const { return iv_.empty(); }
  int64_t size() const { return prefix_.empty() ? 0 : prefix_.back(); }  // number of integers
  bool contains(int64_t x) const;
  int64_t count_in(int64_t lo, int64_t hi) const;  // |set ∩ [lo, hi)|
  IntervalSet clipped(int64_t lo, int64_t hi) const;  // set ∩ [lo, hi)
  IntervalSet united(const IntervalSet& other) const;
  // Index of the first interval whose hi > x (intervals().size() if none).
  size_t first_ending_after(int64_t x) const;
  bool operator==(const IntervalSet& o) const { return iv_ == o.iv_; }

 private:
  int64_t count_below(int64_t x) const;  // |set ∩ (-inf, x)|
  std::vector<Interval> iv_;
  std::vector<int64_t> prefix_;  // prefix_[i] = integers in intervals 0..i
};

}  // namespace rm::sparsity
