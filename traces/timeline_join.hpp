// Predicted-vs-measured: pairs the events of two Timelines that belong to the
// same Schedule op on the same rank. Both sides execute one Schedule, so op
// ids are the join key; events without an op (-1) never join.
#pragma once

#include <cstdint>
#include <vector>

#include "traces/timeline.hpp"

namespace rm::traces {

struct JoinedEvent {
  int64_t op = -1;
  int rank = 0;
  const Event* left = nullptr;
  const Event* right = nullptr;
};

struct TimelineJoin {
  std::vector<JoinedEvent> pairs;        // ordered by (op, rank, occurrence)
  std::vector<const Event*> left_only;   // no partner on the right
  std::vector<const Event*> right_only;  // no partner on the left
};

// When a key (op, rank) occurs k times on a side, the i-th occurrence by start
// time pairs with the i-th on the other side. Pointers refer into the inputs.
TimelineJoin join_on_op(const Timeline& left, const Timeline& right);

}  // namespace rm::traces
