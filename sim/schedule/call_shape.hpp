// What a collective call's transfer plan depends on, read off the Schedule once
// for the engines (engine::begin_call) and the report (report::core::flow_plan),
// which plan each shape once per run: kind, members, replicas (0 unless the
// call's group spans replicas under the data-parallel shortcut), bytes, and the
// broadcast root's member index (0 for other kinds).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

struct CallShapeKey {
  OpKind kind = OpKind::all_reduce;
  int members = 0;
  int replicas = 0;  // 0: an ordinary call
  int64_t bytes = 0;
  int root = 0;
  bool spanning() const { return replicas > 0; }
  auto operator<=>(const CallShapeKey&) const = default;
};

// first: the call's first op (any member's: they agree) and its bytes; g: its
// group; replicas: the Schedule's ReplicaSymmetry::replicas; members: the call's ops.
inline CallShapeKey call_shape_key(const Op& first, int64_t bytes, const Group& g, int replicas, int members) {
  CallShapeKey k{first.kind, members, replicas > 1 && g.spans_replicas ? replicas : 0, bytes, 0};
  if (first.kind == OpKind::broadcast)
    k.root = static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), first.peer) - g.ranks.begin());
  return k;
}

// call: the call's ops in group member order (CommMatching::calls).
inline CallShapeKey call_shape_key(const Schedule& s, const std::vector<OpId>& call) {
  const Op& first = s.ops[static_cast<size_t>(call.front())];
  return call_shape_key(first, s.desc(first).bytes, s.groups[static_cast<size_t>(first.group)], s.symmetry.replicas,
                        static_cast<int>(call.size()));
}

}  // namespace rm::schedule
