// Deadlock detection: a zero-time run of a structurally sound, acyclic
// Schedule through the run driver (run_driver.hpp), whose backend ends every
// op as soon as it starts. Ops that never end are stuck.
#pragma once

#include <vector>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/validate.hpp"

namespace rm::schedule {

// One problem per stream that stops short, naming the op it stops at and
// what that op waits for. Empty when everything runs to completion.
std::vector<Problem> find_deadlocks(const Schedule& s, const CommMatching& m);
// The same, taking the matching over (no copy of it for the run plan).
std::vector<Problem> find_deadlocks(const Schedule& s, CommMatching&& m);

}  // namespace rm::schedule
