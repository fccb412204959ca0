// Which communication ops meet: the k-th send from A to B with tag t pairs with
// the k-th recv on B from A with tag t (id order), as MPI and NCCL match; the
// k-th op of each member on (group, tag) forms the k-th call of a collective.
// Validation and the engines both use it.
#pragma once

#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

struct CommMatching {
  std::vector<OpId> partner;                 // per op: the matched send/recv; -1 if none or not p2p
  std::vector<int64_t> call_of;              // per op: index into calls; -1 if not a collective
  std::vector<std::vector<OpId>> calls;      // each collective call: its ops, in group member order
                                             // (-1 where a member has no op for that call)
};

// Never throws on bad schedules: unmatched ops get partner -1; validate() reports.
// Ops with an unknown rank or group are skipped.
CommMatching match_comms(const Schedule& s);

}  // namespace rm::schedule
