// The report's flat view of when each op of a Schedule ran: start and end per
// op id. Read off a Timeline that joins the Schedule (each op's first event),
// or taken straight from an engine's op times, so a sweep point or a plan
// candidate is reported without building a Timeline's per-op events (each
// ~160 bytes with three strings). The step report, the critical path and
// bound-by read the same arrays either way: one code path for both.
#pragma once

#include <cstddef>
#include <vector>

#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::report {

struct OpSpans {
  std::vector<double> start, end;  // per op id; 0 where the op has no times
  std::vector<char> has;           // per op id: 1 where it has times; empty: every op has
  bool has_op(size_t id) const { return has.empty() || has[id] != 0; }
};

// Each op's first event in tl (events of other op ids are ignored).
OpSpans spans_of(const schedule::Schedule& s, const traces::Timeline& tl);

}  // namespace rm::report
