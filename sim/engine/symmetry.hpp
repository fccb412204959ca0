// The data-parallel shortcut on the engine's side (docs/engines.md, "Replica
// symmetry"): a Schedule with ReplicaSymmetry holds replica 0 only. It is exact
// when translating every GPU by ranks_per_replica (modulo the world) maps the
// routes the step uses onto themselves, link for link. Then every replica's ops
// take replica 0's times, and the engine runs replica 0 alone provided that
//   - a collective over a group spanning replicas is planned for all its members,
//     replica 0's transfers run and a dependency on another replica's transfer is
//     one on its image in replica 0 (cost::plan_collective of a spanning shape key);
//   - a link carries each of replica 0's flows with the number of its translates
//     that cross it: links are folded onto one representative per orbit under the
//     translation and FlowNetwork shares capacity by those weights (fold_route).
// The SimGrid engine runs it the same way with SimGrid's own links: every flow on a
// representative link has replicas / (its orbit's size) translates there per
// crossing, so the link's capacity over that number, crossed once per position,
// is the same max-min constraint (FoldedRoute::path, docs/simgrid.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/collective_plan.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/topology/topology.hpp"

namespace rm::engine {

// A run under the shortcut met a route whose translates are not its copies: the
// shortcut is not exact for this Schedule. A streamed run meets it as the route is
// first used; its caller may run the full step instead (the whole run's path
// proves the shortcut beforehand, symmetry_refusal).
struct ShortcutNotExact : schedule::ScheduleError {
  explicit ShortcutNotExact(const std::string& reason)
      : schedule::ScheduleError("the data-parallel shortcut is not exact here: " + reason), why(reason) {}
  std::string why;
};

// A route of replica 0 folded onto orbit representatives: each link once, with its weight.
struct FoldedRoute {
  std::vector<int> links;
  std::vector<int32_t> weights;
  // Per link of the route, in route order: its orbit's representative (repeated
  // where the route crosses one orbit twice) and replicas / the orbit's size,
  // which is the representative's own figure, the same in every route.
  std::vector<int> path;
  std::vector<int32_t> path_weights;
};

class ReplicaRoutes {
 public:
  ReplicaRoutes(const topology::Topology& t, const cost::CostModel& m, schedule::ReplicaSymmetry sym);
  int world() const { return replicas_ * shift_; }
  // GPU `gpu` translated by k replicas.
  int translate(int gpu, int k) const { return (gpu + k * shift_) % world(); }
  // The route src -> dst folded. "" when its translates are its links translated (with
  // equal rates and latencies) consistently with every route folded before; else why not.
  std::string fold(int src, int dst, FoldedRoute& out);

 private:
  const topology::Topology& t_;
  const cost::CostModel& m_;
  int replicas_, shift_;
  std::vector<int> image_, preimage_;  // per link: the link translation, as far as the routes define it (-1: not yet)
  std::vector<std::vector<int>> routes_;  // fold's scratch: the route's translates
  std::vector<int> orbit_;
};

// Why the analytic engine cannot run `s` by its symmetry ("" when it can): every GPU
// pair its p2p ops and collectives use must fold (ReplicaRoutes::fold), and a group
// spanning replicas must hold ascending members of replica 0 and see no broadcast.
std::string symmetry_refusal(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m);

}  // namespace rm::engine
