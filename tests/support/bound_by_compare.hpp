// Two bound-by analyses figure for figure: every field of every link (the
// JSON keeps only the 16 busiest), for tests that hold one way of computing it
// to another (the op-times form against the Timeline form, a streamed run
// against the whole one).
#pragma once

#include <gtest/gtest.h>

#include "sim/report/bound_by.hpp"

namespace rm::test {

inline void expect_same_links(const report::BoundBy& a, const report::BoundBy& b) {
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t i = 0; i < a.links.size(); ++i) {
    const report::LinkLoad &x = a.links[i], &y = b.links[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.link, y.link);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.busy_s, y.busy_s);
    EXPECT_EQ(x.utilisation, y.utilisation);
    EXPECT_EQ(x.busy_utilisation, y.busy_utilisation);
    EXPECT_EQ(x.critical_s, y.critical_s);
    EXPECT_EQ(x.ring_bytes, y.ring_bytes);
    EXPECT_EQ(x.ring_busy_s, y.ring_busy_s);
    ASSERT_EQ(x.phases.size(), y.phases.size());
    for (size_t p = 0; p < x.phases.size(); ++p) {
      EXPECT_EQ(x.phases[p].bytes, y.phases[p].bytes);
      EXPECT_EQ(x.phases[p].busy_s, y.phases[p].busy_s);
    }
  }
}

}  // namespace rm::test
