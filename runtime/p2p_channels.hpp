// Which NCCL communicator ("channel") carries each send/recv of a Schedule, for
// the cuda backend's multi-process mode. Host logic only, so it is tested
// without a GPU. NCCL runs one communicator's operations in the order a rank
// issues them, whatever CUDA stream they are on, and pairs the k-th send A->B
// with the k-th recv on B from A. A channel per (sender's stream, receiver's
// stream) pair, spanning all ranks, therefore adds no order the run driver
// does not already impose — provided each rank uses a channel from one stream
// only (true when a transfer's two sides are on streams of the same id) and
// the channel's first-in-first-out pairing is the Schedule's matching. Both are
// checked here; a Schedule that breaks them is refused, naming the op.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

struct P2pChannels {
  std::vector<int32_t> of_op;               // per op: its channel; -1 when not a matched send/recv
  std::vector<std::pair<int, int>> streams;  // per channel: (send's stream id, recv's stream id), sorted
};

// Throws ScheduleError naming the op for a transfer that no channel can carry as the Schedule says.
P2pChannels p2p_channels(const schedule::Schedule& s, const schedule::CommMatching& m);

}  // namespace rm::runtime
