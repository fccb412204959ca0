// Exact number of allowed (q, k) pairs between two contiguous token ranges,
// by interval arithmetic: slash pairs are a sum of a piecewise-linear overlap
// over each offset interval, vertical pairs a sum over each column interval,
// and their intersection is subtracted so that overlaps count once.
#pragma once

#include <cstdint>

#include "sim/sparsity/head_pattern.hpp"

namespace rm::sparsity {

// Pairs q in [q.lo, q.hi), k in [k.lo, k.hi) with k <= q, q - k in offsets.
int64_t offset_pairs(Interval q, Interval k, const IntervalSet& offsets);
// Pairs q in q, k in k with k <= q and k in columns.
int64_t column_pairs(Interval q, Interval k, const IntervalSet& columns);
// Pairs allowed by the head's mask.
int64_t allowed_pairs(const HeadPattern& p, Interval q, Interval k);

}  // namespace rm::sparsity
