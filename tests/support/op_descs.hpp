// Tests' access to an op's costs and data descriptors, which ops share through
// Schedule::descs: editing one op's entry alone, and comparing ops of Schedules
// (or streamed chunks) whose tables differ.
#pragma once

#include <span>

#include "sim/schedule/schedule.hpp"

namespace rm::testing {

// op's entry, copied to one of its own and returned for editing (other ops keep theirs).
inline schedule::OpDesc& edit_desc(schedule::Schedule& s, schedule::Op& op) {
  s.set_desc(op, s.desc(op));
  return s.descs.back();
}

// An op with its entry resolved (desc set to -1): equal when the ops are, whatever their tables.
struct ResolvedOp {
  schedule::Op op;
  schedule::OpDesc d;
  bool operator==(const ResolvedOp&) const = default;
};
inline ResolvedOp resolved(const schedule::Op& op, std::span<const schedule::OpDesc> descs) {
  ResolvedOp r{op, schedule::desc_in(descs, op)};
  r.op.desc = -1;
  return r;
}
inline ResolvedOp resolved(const schedule::Schedule& s, const schedule::Op& op) { return resolved(op, s.descs); }

}  // namespace rm::testing
