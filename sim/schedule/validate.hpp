// Is a Schedule executable? Checks ids, ranks, streams and groups, dangling
// and cross-rank dependencies, p2p matching (peer, tag, bytes), collective
// membership, dependency cycles, and deadlock (a zero-time run through the
// run driver, run_driver.hpp: the same semantics the engines and the runtime use), and the data descriptors:
// buffers exist and sit on the op's rank, a transfer's bytes equal its
// buffers' sizes, token sets and head ranges lie within the experiment's
// sequence and model. A Schedule that declares buffers must describe every
// communication, attention and GEMM op. Runs before any rank starts.
#pragma once

#include <string>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

enum class ProblemKind {
  bad_id,          // ids not dense (duplicate or out of place)
  bad_rank,        // op or group on an unknown rank
  bad_stream,      // op on an unknown stream
  bad_group,       // collective on an unknown group, or group malformed
  bad_field,       // field out of range for the op's kind
  dangling_dep,    // dependency on an op that does not exist
  cross_rank_dep,  // explicit dependency on another rank's op
  unmatched_p2p,   // send/recv without a partner with the same peer, tag and bytes
  bad_collective,  // a member missing, or members disagree on kind/bytes
  bad_join,        // joined op not right after a p2p op of its stream
  cycle,           // dependencies (with stream order) form a cycle
  deadlock,        // ops that can never run
  bad_data,        // a buffer, token set or descriptor malformed, missing, or not fitting its op
};

struct Problem {
  ProblemKind kind;
  OpId op = -1;         // the op it is about; -1 when about a rank or group
  std::string message;  // one line, starts with describe(op) when there is an op
};

// All problems, in a stable order. Cycle and deadlock checks run only when the
// structure is sound (they would otherwise repeat the same fault).
std::vector<Problem> check(const Schedule& s);

// Throws ScheduleError with the first problem's message (prefixed with
// `context`, e.g. a file name, when given).
void validate(const Schedule& s, const std::string& context = "");

}  // namespace rm::schedule
