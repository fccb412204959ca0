// Element routing of an all-to-all: which rows of a member's input go to which
// member, in the order the receiver stores them. Both sides derive the same
// order from the buffers' layouts (runtime/layouts.hpp), so a message is plain
// rows of head_dim elements, packed on the host and unpacked where they land.
// The cpu and cuda backends share it.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/layouts.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

struct ExchangePlan {
  struct Pair {
    int read = -1, write = -1;  // buffer ids on this rank
  };
  std::vector<Pair> pairs;  // the op's (read i, write i)
  // Per member j (group order) and per pair: rows of my read to send to j, in j's
  // storage order; rows of my write that j's message fills, in message order.
  std::vector<std::vector<std::vector<int64_t>>> send_rows, recv_rows;  // [member][pair] -> rows
  int64_t row_elements = 0;  // head_dim
};

// The plan of all_to_all op `op` (its rank is "me"). Throws ScheduleError naming
// the op when a side has no layout or the rows do not cover the written buffers exactly.
ExchangePlan exchange_plan(const schedule::Schedule& s, const schedule::CommMatching& m, const Layouts& l,
                           schedule::OpId op);

}  // namespace rm::runtime
