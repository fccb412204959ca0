// An execution order for engines: every op after its explicit dependencies and
// after the previous op of its stream. Matched communication ops impose no
// order between each other (they happen together).
#pragma once

#include <optional>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

// Kahn's algorithm, smallest ready id first (deterministic). Throws
// ScheduleError naming an op on a cycle. Assumes ids, ranks and streams valid.
std::vector<OpId> topological_order(const Schedule& s);

// The ops of one cycle (each depends on the next, by dep or stream order), or
// nullopt when acyclic. Dangling deps are ignored.
std::optional<std::vector<OpId>> find_cycle(const Schedule& s);

}  // namespace rm::schedule
