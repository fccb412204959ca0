#include "sim/cost/collective_plan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace rm::cost {

using schedule::OpKind;

namespace {

constexpr PlanSlot kNone{};

// Ring: at stage k member j sends one chunk to j+1. It may start once its own
// previous send is done (one channel per direction) and once the chunk it
// forwards arrived from j-1 at stage k-1.
PlanHop ring_hop(int, int, int k, int j) {
  PlanHop h{j, j + 1, {kNone, kNone}};
  if (k > 0) h.deps = {PlanSlot{k - 1, j}, PlanSlot{k - 1, j - 1}};
  return h;
}

// Pairwise all-to-all: at stage k member j sends to j+k+1 and receives from
// j-k-1; a stage starts once the member's previous send and the receiver's
// previous receive are done (the receiver's previous receive came from j+1).
PlanHop pairwise_hop(int, int, int k, int j) {
  PlanHop h{j, j + k + 1, {kNone, kNone}};
  if (k > 0) h.deps = {PlanSlot{k - 1, j}, PlanSlot{k - 1, j + 1}};
  return h;
}

// Pipelined chain root -> root+1 -> ... -> root+n-1: chunk k on hop j follows
// chunk k-1 on the same hop and chunk k on hop j-1.
PlanHop chain_hop(int, int root, int k, int j) {
  PlanHop h{root + j, root + j + 1, {kNone, kNone}};
  if (k > 0) h.deps[0] = PlanSlot{k - 1, j};
  if (j > 0) h.deps[1] = PlanSlot{k, j - 1};
  return h;
}

int broadcast_chunks(double bytes) {
  return std::clamp(static_cast<int>(std::ceil(bytes / kBroadcastChunkBytes)), 1, kMaxBroadcastChunks);
}

double per_member(int n, double bytes) { return bytes / n; }
int first_stage(int) { return 1; }
int every_stage(int stages) { return stages; }
int stage_count(int, int stages) { return stages; }

// The table: one row per algorithm (docs/cost-model.md, "Collectives").
const CollectiveRow kRows[] = {
    {OpKind::all_gather, "ring", [](int n, double) { return n - 1; }, per_member, true, ring_hop, first_stage,
     stage_count},
    {OpKind::reduce_scatter, "ring", [](int n, double) { return n - 1; }, per_member, true, ring_hop, first_stage,
     stage_count},
    {OpKind::all_reduce, "ring (reduce-scatter then all-gather)", [](int n, double) { return 2 * (n - 1); },
     per_member, true, ring_hop, first_stage, stage_count},
    {OpKind::all_to_all, "pairwise", [](int n, double) { return n - 1; }, per_member, true, pairwise_hop, every_stage,
     stage_count},
    {OpKind::broadcast, "pipelined chain", [](int, double bytes) { return broadcast_chunks(bytes); },
     [](int, double bytes) { return bytes / broadcast_chunks(bytes); }, false, chain_hop, first_stage,
     [](int n, int stages) { return stages + n - 2; }},
};

int wrap(int m, int n) { return ((m % n) + n) % n; }

// The row's transfers over n members (x replicas when folding), its first
// `max_stages` stages: every sender's (folding: replica 0's senders only,
// dependencies on their images in replica 0).
std::vector<PlannedTransfer> expand(const CollectiveRow& row, int n, int replicas, double bytes, int root,
                                    int max_stages) {
  const bool fold = replicas > 1;
  const int N = fold ? n * replicas : n;
  if (n < 1) throw std::invalid_argument("plan_collective: a group needs at least one member");
  if (N == 1) return {};
  if (fold && (!row.every_member_sends || root != 0))
    throw std::invalid_argument(std::string("plan_collective: a group spanning replicas runs no ") +
                                std::string(to_string(row.kind)));
  const int width = row.every_member_sends ? N : N - 1;  // senders per stage of the full plan
  const int senders = fold ? n : width;                   // those planned here
  const int stages = std::min(row.stages(N, bytes), max_stages);
  const double chunk = row.chunk_bytes(N, bytes);
  auto index = [&](PlanSlot p) -> int32_t {
    if (p.stage < 0) return -1;
    // Folding: the image in replica 0 of the full plan's transfer (stage, slot).
    return static_cast<int32_t>(p.stage * senders + (fold ? wrap(p.slot, N) % n : wrap(p.slot, width)));
  };
  std::vector<PlannedTransfer> out;
  out.reserve(size_t(senders) * size_t(std::max(stages, 0)));
  for (int k = 0; k < stages; ++k)
    for (int j = 0; j < senders; ++j) {
      const PlanHop h = row.hop(N, root, k, j);
      out.push_back({wrap(h.src, N), wrap(h.dst, N), chunk, {index(h.deps[0]), index(h.deps[1])}});
    }
  return out;
}

}  // namespace

const CollectiveRow& collective_row(OpKind kind) {
  for (const CollectiveRow& r : kRows)
    if (r.kind == kind) return r;
  throw std::invalid_argument("plan_collective: not a collective op kind");
}

std::vector<PlannedTransfer> plan_collective(OpKind kind, int n, double bytes, int root) {
  return expand(collective_row(kind), n, 0, bytes, root, INT32_MAX);
}

std::vector<PlannedTransfer> plan_collective(const schedule::CallShapeKey& k) {
  return expand(collective_row(k.kind), k.members, k.replicas, double(k.bytes), k.root, INT32_MAX);
}

std::vector<std::pair<int, int>> collective_pairs(OpKind kind, int n, int root, int replicas) {
  const CollectiveRow& row = collective_row(kind);
  const int N = replicas > 1 ? n * replicas : n;
  const int stages = N > 1 ? row.pair_stages(row.stages(N, 1.0)) : 0;
  std::vector<std::pair<int, int>> out;
  std::unordered_set<int64_t> seen;
  for (const PlannedTransfer& t : expand(row, n, replicas, 1.0, root, stages))
    if (seen.insert(int64_t(t.src) << 32 | uint32_t(t.dst)).second) out.emplace_back(t.src, t.dst);
  return out;
}

double collective_seconds(OpKind kind, int n, double bytes, double lat, double rate) {
  const CollectiveRow& row = collective_row(kind);
  if (n <= 1) return 0;
  return double(row.depth(n, row.stages(n, bytes))) * (lat + row.chunk_bytes(n, bytes) / rate);
}

}  // namespace rm::cost
