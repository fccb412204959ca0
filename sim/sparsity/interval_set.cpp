#include "sim/sparsity/interval_set.hpp"

#include <algorithm>

namespace rm::sparsity {

IntervalSet::IntervalSet(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.hi <= i.lo; });
  auto by_lo = [](const Interval& x, const Interval& y) { return x.lo < y.lo; };
  if (!std::is_sorted(intervals.begin(), intervals.end(), by_lo)) std::sort(intervals.begin(), intervals.end(), by_lo);
  for (const auto& i : intervals) {
    if (!iv_.empty() && i.lo <= iv_.back().hi) iv_.back().hi = std::max(iv_.back().hi, i.hi);
    else iv_.push_back(i);
  }
  prefix_.reserve(iv_.size());
  int64_t n = 0;
  for (const auto& i : iv_) prefix_.push_back(n += i.size());
}

IntervalSet IntervalSet::from_points(std::vector<int64_t> points) {
  std::vector<Interval> iv;
  iv.reserve(points.size());
  for (int64_t p : points) iv.push_back({p, p + 1});
  return IntervalSet(std::move(iv));
}

size_t IntervalSet::first_ending_after(int64_t x) const {
  return static_cast<size_t>(
      std::upper_bound(iv_.begin(), iv_.end(), x, [](int64_t v, const Interval& i) { return v < i.hi; }) -
      iv_.begin());
}

int64_t IntervalSet::count_below(int64_t x) const {
  size_t i = first_ending_after(x);  // intervals before i lie wholly below x
  int64_t n = i == 0 ? 0 : prefix_[i - 1];
  if (i < iv_.size() && iv_[i].lo < x) n += x - iv_[i].lo;
  return n;
}

bool IntervalSet::contains(int64_t x) const { return count_in(x, x + 1) == 1; }

int64_t IntervalSet::count_in(int64_t lo, int64_t hi) const {
  return hi <= lo ? 0 : count_below(hi) - count_below(lo);
}

IntervalSet IntervalSet::clipped(int64_t lo, int64_t hi) const {
  std::vector<Interval> out;
  for (size_t i = first_ending_after(lo); i < iv_.size() && iv_[i].lo < hi; ++i)
    out.push_back({std::max(lo, iv_[i].lo), std::min(hi, iv_[i].hi)});
  return IntervalSet(std::move(out));
}

IntervalSet IntervalSet::united(const IntervalSet& other) const {
  std::vector<Interval> all = iv_;
  all.insert(all.end(), other.iv_.begin(), other.iv_.end());
  return IntervalSet(std::move(all));
}

}  // namespace rm::sparsity
