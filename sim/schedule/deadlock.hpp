// Deadlock detection by an abstract run of a structurally sound, acyclic
// Schedule: each stream runs its ops in id order; an op starts when its stream
// reaches it and its dependencies are done; a send/recv finishes once its
// partner has started too (rendezvous), a collective once every member has
// started; joined p2p ops start together. Ops that never finish are stuck.
#pragma once

#include <vector>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/validate.hpp"

namespace rm::schedule {

// One problem per stream that stops short, naming the op it stops at and
// what that op waits for. Empty when everything runs to completion.
std::vector<Problem> find_deadlocks(const Schedule& s, const CommMatching& m);

}  // namespace rm::schedule
