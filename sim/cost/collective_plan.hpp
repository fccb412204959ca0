// How a collective call becomes point-to-point transfers: the one owner of
// every collective's plan. Each algorithm is one row of a table (collective_plan.cpp):
// how many stages it runs, what each transfer carries, who sends to whom at each
// stage and what each transfer waits for. Everything else derives from the row:
//   - plan_collective: the transfers both engines run over real routes;
//   - the same for a group spanning replicas under the data-parallel shortcut
//     (engine/symmetry.hpp): replica 0's transfers, dependencies on their images;
//   - collective_seconds: the closed form calibration fits (the plan's longest
//     dependency chain x one hop), and collective_pairs, the hops it prices;
//   - the (sender, receiver) pairs the report's bound-by counts.
// Adding an algorithm is adding a row. Formulas and NCCL's reasons: docs/cost-model.md.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/schedule/call_shape.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::cost {

// One point-to-point transfer of a decomposed collective. src and dst are
// indices into the group's member list; deps index earlier transfers of the
// same plan that must end before this one starts (-1: none). In a plan for a
// group spanning replicas dst is a full member index (replica dst / n, member
// dst % n) and deps index that plan (a dependency on another replica's transfer
// is one on its image in replica 0).
struct PlannedTransfer {
  int src = 0;
  int dst = 0;
  double bytes = 0;
  std::array<int32_t, 2> deps{-1, -1};
};

// Broadcast pipelines its buffer through the ring in chunks of this size (as
// NCCL's ring broadcast does), at most kMaxBroadcastChunks chunks.
inline constexpr double kBroadcastChunkBytes = 512.0 * 1024;
inline constexpr int kMaxBroadcastChunks = 64;

// A transfer of a row's plan by position: stage and sender slot.
struct PlanSlot {
  int stage = -1;  // -1: no dependency
  int slot = 0;
};
// Stage k's transfer from sender slot j: its members and the transfers it waits for.
struct PlanHop {
  int src = 0, dst = 0;
  std::array<PlanSlot, 2> deps{};
};

// One collective algorithm. Transfer (stage k, slot j) is plan entry k * senders + j.
struct CollectiveRow {
  schedule::OpKind kind;
  const char* algorithm;  // as docs/cost-model.md names it
  // Stages for n members and the op's bytes, and the bytes of each transfer.
  int (*stages)(int n, double bytes);
  double (*chunk_bytes)(int n, double bytes);
  // Transfers per stage: every member sends once (slot = sender) or one per hop
  // of a chain from the root (n - 1).
  bool every_member_sends;
  // Stage k's transfer from slot j of n members, rooted at `root`. Members
  // are taken modulo n by the caller.
  PlanHop (*hop)(int n, int root, int k, int j);
  // Stages whose (sender, receiver) pairs cover every pair of the plan: later
  // stages repeat them (1 for a ring or a chain, every stage for pairwise).
  int (*pair_stages)(int stages);
  // The plan's longest dependency chain in transfers: the closed form's hop count.
  int (*depth)(int n, int stages);
};

// The row of a collective kind; throws std::invalid_argument for a kind that is not one.
const CollectiveRow& collective_row(schedule::OpKind kind);

// The transfers of a collective call over `members` ranks in group member
// order (the ring order). `bytes` is the op's buffer as nccl-tests counts it:
// all_reduce and broadcast the buffer, all_gather the gathered output,
// reduce_scatter the input, all_to_all the whole send buffer of one rank.
// `root` is the broadcast root's member index.
std::vector<PlannedTransfer> plan_collective(schedule::OpKind kind, int members, double bytes, int root = 0);

// The plan of a call given by its shape key: for a group spanning replicas
// (key.spanning()), the transfers of the full plan over members x replicas whose
// source is in replica 0, in the full plan's order (transfer k * members + i is
// stage k from member i); only rows where every member sends at every stage
// from member 0 can be folded so (std::invalid_argument otherwise).
std::vector<PlannedTransfer> plan_collective(const schedule::CallShapeKey& key);

// The distinct (sender, receiver) member pairs of a call's plan (a group spanning
// replicas: dst a full member index), in plan order of first use.
std::vector<std::pair<int, int>> collective_pairs(schedule::OpKind kind, int members, int root = 0, int replicas = 0);

// Contention-free time of a collective whose hops all cost (latency_s, rate_Bps):
// the plan's longest dependency chain x (latency + one transfer's bytes / rate).
double collective_seconds(schedule::OpKind kind, int members, double bytes, double latency_s, double rate_Bps);

}  // namespace rm::cost
