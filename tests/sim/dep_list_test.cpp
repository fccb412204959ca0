// DepList against std::vector<OpId> as the oracle: random sequences of every
// operation, crossing the in-place / heap boundary both ways.
#include "sim/schedule/dep_list.hpp"

#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace rm::schedule {
namespace {

void expect_same(const DepList& d, const std::vector<OpId>& v, int step) {
  ASSERT_EQ(d.size(), v.size()) << "step " << step;
  ASSERT_EQ(d.empty(), v.empty());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(d[i], v[i]) << "step " << step << " index " << i;
  ASSERT_TRUE(d == v);
  ASSERT_GE(d.capacity(), d.size());
  // In place while it fits, on the heap (and counted) once it has spilled.
  if (d.capacity() <= DepList::kInline) ASSERT_EQ(d.heap_bytes(), 0u);
  else ASSERT_EQ(d.heap_bytes(), (d.capacity() + 1) * sizeof(DepId));  // the block leads with its capacity
}

TEST(DepList, EveryOperationMatchesAVectorOverRandomSequences) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    DepList a, b;
    std::vector<OpId> va, vb;
    for (int step = 0; step < 60; ++step) {
      switch (rng() % 9) {
        case 0: case 1: case 2: {
          const OpId x = OpId(rng() % 1000) - 1;
          a.push_back(x), va.push_back(x);
          break;
        }
        case 3: b = a, vb = va; break;                                   // copy-assign
        case 4: b = std::move(a), vb = std::move(va), a.clear(), va.clear(); break;  // move-assign
        case 5: { DepList c(a); a = std::move(c); break; }               // copy, then move back
        case 6: std::swap(a, b), std::swap(va, vb); break;
        case 7: a.reserve(rng() % 8), a.clear(), va.clear(); break;
        default: {
          std::vector<OpId> v(rng() % 6);
          for (auto& x : v) x = OpId(rng() % 50);
          a = DepList(v), va = v;                                        // from a vector
          break;
        }
      }
      expect_same(a, va, step);
      expect_same(b, vb, step);
    }
  }
}

TEST(DepList, SelfAssignmentAndBracedListsKeepTheirContents) {
  DepList d{1, 2, 3, 4};
  const DepList& same = d;
  d = same;
  EXPECT_TRUE(d == (std::vector<OpId>{1, 2, 3, 4}));
  d = {5};
  EXPECT_TRUE(d == (std::vector<OpId>{5}));
  EXPECT_EQ(d.back(), 5);
  for (DepId& x : d) x += 1;  // mutable iteration, as the file reader rebases ids
  EXPECT_TRUE(d == (std::vector<OpId>{6}));
}

TEST(DepList, TwoDependenciesNeedNoHeapAndTheListIsNoBiggerThanAVector) {
  DepList d{10, 11};
  EXPECT_EQ(d.heap_bytes(), 0u);
  d.push_back(12);
  EXPECT_GT(d.heap_bytes(), 0u);
  static_assert(sizeof(DepList) <= sizeof(std::vector<OpId>));
}

}  // namespace
}  // namespace rm::schedule
