// Building Schedules from generators: ranks, streams, groups, ops with their
// dependencies, and the two shapes that need care — a matched send/recv pair
// and a collective with one op per group member. Ids come back from each call.
// Data descriptors (buffers, reads/writes, attention and GEMM details) are
// attached to ops after they are made; equal descriptors share one table entry.
// The builder checks arguments as it goes (throws std::invalid_argument);
// build() runs the full validation.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

// Where an op belongs in the training step.
struct Where {
  Phase phase = Phase::forward;
  int layer = -1;
  int step = -1;
};

struct ComputeCost {
  double flops = 0.0;
  int64_t blocks = 0;
  int64_t tokens = 0;
  int64_t bytes = 0;  // HBM traffic of a memory-bound op (costed as bytes over HBM bandwidth)
};

struct P2PSpec {
  int send_rank = 0;
  int send_stream = 0;
  int recv_rank = 0;
  int recv_stream = 0;
  int64_t bytes = 0;
  Where where;
  int64_t tag = 0;
};

struct P2PIds {
  OpId send = -1;
  OpId recv = -1;
};

// Ids of a descriptor table's distinct entries, for interning: an open-
// addressing set of entry ids keyed by the entries' hashes, compared against
// the table itself (no key is copied; a lookup allocates nothing).
class TableIndex {
 public:
  // The id of an entry of `table` equal to `value` (hash h), else appends
  // value and returns its id: ids in order of first appearance.
  template <class T, class V>  // V: T (moved in when new) or const T& (copied when new)
  int intern(std::vector<T>& table, V&& value, uint64_t h) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& sl = slots_[i];
      if (sl.id < 0) {
        sl = {static_cast<uint32_t>(h), static_cast<int32_t>(table.size())};
        ++used_;
        table.push_back(std::forward<V>(value));
        return sl.id;
      }
      if (sl.hash == static_cast<uint32_t>(h) && table[static_cast<size_t>(sl.id)] == value) return sl.id;
    }
  }

 private:
  struct Slot {  // 8 bytes: the low half of the hash places and filters
    uint32_t hash = 0;
    int32_t id = -1;
  };
  void grow();
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// d's entry in `table` (appended when new), -1 for kNoDesc: the one way
// builders and readers share entries.
int32_t intern_desc(std::vector<OpDesc>& table, TableIndex& index, const OpDesc& d);

// Ops with the descriptor entries they name (Op::desc indexes `descs`).
struct OpChunk {
  std::vector<Op> ops;
  std::vector<OpDesc> descs;
};
// The ops, naming entries of `from`, re-pointed at a table of their own: each
// entry they use, once, in order of first use.
OpChunk own_descs(std::vector<Op> ops, std::span<const OpDesc> from);

class ScheduleBuilder {
 public:
  explicit ScheduleBuilder(nlohmann::json experiment = nlohmann::json::object(),
                           std::string generator = "");

  int add_rank(int gpu);                                          // returns the rank id
  int add_stream(int rank, StreamKind kind, std::string name = "");  // id on that rank; name defaults to the kind
  int stream(int rank, StreamKind kind) const;                    // first stream of that kind; throws if none
  int add_group(std::vector<int> ranks, std::string name = "");   // returns the group id
  // The data-parallel shortcut's annotations (schedule.hpp, ReplicaSymmetry).
  void set_symmetry(ReplicaSymmetry sym) { s_.symmetry = sym; }
  void set_spans_replicas(int group) { s_.groups.at(static_cast<size_t>(group)).spans_replicas = true; }

  // op.id is assigned and op.desc set to d's entry; everything else is taken as given.
  OpId add_op(Op op, const OpDesc& d = kNoDesc);
  void reserve_ops(size_t n) { s_.ops.reserve(n); }  // a generator that knows its op count
  OpId compute(int rank, int stream, OpKind kind, Where where, ComputeCost cost,
               DepList deps = {});
  void add_dep(OpId op, OpId dep);
  void add_deps(OpId op, std::span<const OpId> deps);

  // A send on send_rank and its matching recv on recv_rank.
  P2PIds p2p(const P2PSpec& spec);
  // Marks ops (send/recv of one rank and stream) as one launch, like
  // ncclGroupStart/End: every op but the lowest id gets joined = true.
  void launch_together(std::span<const OpId> ops);
  // One op per member of `group`, in group member order, on each member's
  // first stream of `stream_kind`. `root` is the broadcast root (else ignored).
  std::vector<OpId> collective(int group, OpKind kind, int64_t bytes, Where where,
                               StreamKind stream_kind, int64_t tag = 0, int root = -1);
  // The same with each member's stream and dependencies chosen by the caller
  // (generators keep several streams of one kind and per-rank ready lists).
  std::vector<OpId> collective(int group, OpKind kind, int64_t bytes, Where where,
                               const std::function<int(int rank)>& stream_of,
                               const std::function<std::vector<OpId>(int rank)>& deps_of, int64_t tag = 0,
                               int root = -1);

  // Data descriptors.
  int add_buffer(int rank, std::string name, BufferRole role, DType dtype, std::vector<int64_t> shape,
                 Instances instances = Instances::one);  // returns the buffer id
  int token_set(const TokenSet& t);        // id of an equal set, added when new
  void set_access(OpId op, std::vector<int> reads, std::vector<int> writes);
  void set_attention(OpId op, const Attention& a);  // attn_fwd / attn_bwd only
  void set_gemm(OpId op, const Gemm& g);            // gemm only

  const Schedule& peek() const { return s_; }
  Schedule build() &&;  // validates; throws ScheduleError naming the first problem
  // Leaves the buffers out: the Schedule becomes costable-only (schedule.hpp), as a
  // generator that recorded no accesses needs for build() to validate it. Throws
  // std::invalid_argument where an op names buffers.
  void drop_buffers();

  // Streaming (docs/engines.md, "Streaming"): hands out the ops built since the
  // last call (ids stay global: the next op is next_op_id()) with their own
  // descriptor entries (the builder's table then starts afresh). An op handed out
  // may still be named as a dependency but no longer changed; build() refuses a
  // builder that handed ops out (the Schedule is no longer whole).
  OpChunk take_ops();
  OpId next_op_id() const { return op_base_ + static_cast<OpId>(s_.ops.size()); }

 private:
  void check_op(OpId op) const;  // op exists (it may have been handed out)
  Op& held(OpId op);             // op exists and is still held (not handed out)
  int32_t intern_desc(const OpDesc& d);  // -1 for kNoDesc
  void redescribe(Op& o, int32_t OpDesc::*field, int32_t id);  // o's entry with one descriptor id replaced
  Schedule s_;
  OpId op_base_ = 0;  // id of s_.ops[0]: ops before it were handed out by take_ops
  TableIndex token_set_ids_, access_ids_, attention_ids_, gemm_ids_, desc_ids_;
};

}  // namespace rm::schedule
