// What the pieces of a step generator share while one training step is built:
// the builder, which (d, h, c, t) each rank is (rank id = GPU index), its
// streams, the process groups, the ring layout of every context group and
// the attention work cache. Pieces hand each other "ready" lists: per rank,
// the ops that must end before the next piece may start on that rank.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/generate/attention_kind.hpp"
#include "sim/generate/attention_work.hpp"
#include "sim/generate/buffer_ids.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/topology/topology.hpp"

namespace rm::generate {

using schedule::OpId;
using RankDeps = std::vector<std::vector<OpId>>;  // per rank
inline constexpr auto kPerLayer = schedule::Instances::per_layer;

// The dtype of dK/dV on the wire and in the ring's accumulators (parallel.grad_comm_dtype).
inline schedule::DType grad_dtype(const Experiment& e) {
  return e.parallel.grad_comm_dtype == GradDtype::fp32 ? schedule::DType::fp32 : schedule::DType::bf16;
}

struct Coord {
  int d = 0, h = 0, c = 0, t = 0;  // t: the tensor-parallel rank inside the (d, h, c) rank's group
};

// Stream ids of one rank; -1 where the schedule does not need the stream.
// Communication streams are comm_inter when any peer they serve is on another node.
struct RankStreams {
  int compute = -1;
  int exchange = -1;   // head all-to-all, stripe shuffle, index-building collectives
  int kv_inner = -1;   // inner ring K/V (the whole ring for a flat ring)
  int kv_outer = -1;   // outer ring K/V (hierarchical, double ring)
  int dkv_inner = -1;  // dK/dV travelling with their block, on their own communicators
  int dkv_outer = -1;
  int dp = -1;         // gradient and ZeRO parameter collectives
  int tp = -1;         // tensor parallelism's all-gathers and reduce-scatters (inside the node)
};

struct StepContext {
  // `cache` (may be null) supplies partitions and pair costs (placement/work_cache.hpp).
  // one_replica: the data-parallel shortcut (docs/generators.md): only replica 0's ranks
  // and ops, the replica groups (gradients, ZeRO) spanning replicas.
  StepContext(const Experiment& experiment, const sparsity::SparsityModel& patterns, const topology::Topology& topology,
              placement::WorkCache* cache = nullptr, bool one_replica = false);

  int rank(int d, int h, int c, int t) const { return map.gpu(d, h, c, t); }
  // Context groups (one ring each) are per (d, h, t): every tensor rank runs the ring
  // over its own heads, as Megatron's context parallelism does.
  int group_index(int d, int h, int t) const { return (d * e.parallel.hp + h) * e.parallel.tp + t; }
  const RingLayout& layout(int d, int h, int t) const { return layouts[size_t(group_index(d, h, t))]; }
  // The heads rank r's attention covers (its head rank's, its tensor rank's share).
  placement::HeadShard heads_of(int r) const {
    const Coord& x = coord[size_t(r)];
    return placement::head_shard(e.model, e.parallel, x.h, x.t);
  }
  // How the ring's token order is reached inside every attention call
  // (parallel.shuffle = per_call): stripe / balanced by an all-to-all in the
  // context group, zigzag by an all-to-all in each pair {c, cp-1-c} (each rank
  // swaps its second half with its pair's); nothing with shuffle = once.
  enum class Shuffle { none, stripe, zigzag };
  static Shuffle shuffle_of(const Parallel& p);  // from the keys alone (the memory model asks too)
  Shuffle shuffle() const { return shuffle_of(e.parallel); }
  bool shuffles() const { return shuffle() != Shuffle::none; }
  bool has_backward() const { return e.scope != Scope::attention_fwd; }
  // Local tokens of a rank before any exchange (batch included): what the dense
  // layer's GEMMs see (with tp > 1, after the tensor group's all-gather).
  int64_t local_tokens() const {
    return e.workload.seq_len / (int64_t(e.parallel.cp) * e.parallel.hp) * e.workload.batch;
  }
  // Tokens of a rank in the sequence-parallel regions (norms, residual stream): its
  // 1/tp share of local_tokens() (all of them with tp = 1).
  int64_t sp_tokens() const { return local_tokens() / e.parallel.tp; }
  bool tensor_parallel() const { return e.parallel.tp > 1; }

  // One op per member of `group` on stream `which`, each after ready[member]; ready[member]
  // becomes that op. Returns the ops in member order.
  std::vector<OpId> collective(int group, schedule::OpKind kind, int64_t bytes, schedule::Where where,
                               int RankStreams::*which, RankDeps& ready, int64_t tag, int root = -1);
  // A compute op on `rank` after ready[rank]; ready[rank] becomes it.
  OpId compute(int rank, schedule::OpKind kind, schedule::Where where, schedule::ComputeCost cost, RankDeps& ready);

  // The buffer `name` on `rank`, declared on first use (then its role, dtype and
  // shape must agree: one name, one tensor).
  int buffer(int rank, const std::string& name, schedule::BufferRole role, schedule::DType dtype,
             std::vector<int64_t> shape, schedule::Instances instances = schedule::Instances::one);
  void access(OpId op, std::vector<int> reads, std::vector<int> writes) {
    if (with_accesses) b.set_access(op, std::move(reads), std::move(writes));
  }
  bool with_accesses = true;  // Accesses::none (generate.hpp) clears it

  const Experiment& e;
  const topology::Topology& topo;
  // The replicas emitted (dp, or 1 with the shortcut) and their ranks: every loop over
  // data-parallel ranks or ranks runs to these, so the full step is what it always was.
  int sim_dp = 1;
  int sim_world = 1;
  bool patterns_dynamic = false;
  bool patterns_sparse = false;  // some head is not dense causal: attention reads a sparse index
  bool patterns_causal = true;   // false with full attention: no (query, key) set is causally masked
  placement::DeviceMap map;
  std::unique_ptr<AttentionKind> kind;
  AttentionWork work;
  schedule::ScheduleBuilder b;
  std::vector<Coord> coord;         // per rank
  std::vector<RingLayout> layouts;  // per (d, h, t), group_index
  std::vector<int> context_groups;  // per (d, h, t), group_index
  std::vector<std::vector<int>> shuffle_groups;  // per (d, h, t): the groups the shuffle's all-to-alls run in
  std::vector<int> head_groups;     // per (d, c, t)
  std::vector<int> tensor_groups;   // per (d, h, c) with tp > 1
  // Per tensor rank t: every rank holding the same weight shard (the whole world with
  // tp = 1), over which gradients are reduced and ZeRO shards.
  std::vector<int> replica_groups;
  std::vector<RankStreams> streams;  // per rank
  BufferMemo memo;                   // buffer ids by rank, reused by every layer and pass
  // Streaming (generate_step_chunks): hands the ops built so far out at the step's
  // cut points (after each layer's forward and backward); empty for a whole Schedule.
  std::function<void()> cut;
  void cut_here() {
    if (cut) cut();
  }
  // Also after each ring step (generate::ring_step_cuts_apply says where that stays exact).
  bool cut_ring_steps = false;
  void cut_ring_step() {
    if (cut_ring_steps) cut_here();
  }

 private:
  std::map<std::pair<int, std::string>, int> buffer_ids_;
};

}  // namespace rm::generate
