// The Schedule IR: what each rank does, on which stream, in which order,
// depending on what — compute ops with cost descriptors, communication ops
// with bytes and peer or group, explicit dependencies. It says what, never how
// long: the cost model and engines add time, the runtime executes it.
// Ids are dense: ranks[i].id == i, ranks[r].streams[s].id == s,
// groups[g].id == g, ops[i].id == i (validate() checks it).
// Stream order is op id order: a stream runs its ops one at a time, by id.
// From version 2 a Schedule is executable: it declares buffers (tensors per
// rank) and every op names the buffers it reads and writes; attention ops say
// which tokens and heads they cover, which mask and sparse index apply, and
// GEMMs their shape. These descriptors live in tables the op refers to by
// index, so an op stays small and repeated layers share entries.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/schedule/dep_list.hpp"

namespace rm::schedule {

using OpId = int64_t;

enum class OpKind : uint8_t {
  // compute
  attn_fwd, attn_bwd, gemm, elementwise, index_build,
  // point-to-point (matched per (sender, receiver, tag), in id order)
  send, recv,
  // collectives (matched per (group, tag), in id order on each member)
  all_reduce, all_gather, reduce_scatter, all_to_all, broadcast,
};
inline constexpr int kOpKindCount = 12;

enum class Phase : uint8_t { forward, backward, recompute, optimizer };
inline constexpr int kPhaseCount = 4;

enum class StreamKind : uint8_t { compute, comm_intra, comm_inter };
inline constexpr int kStreamKindCount = 3;

enum class DType : uint8_t { bf16, fp32, int32 };
inline constexpr int kDTypeCount = 3;

// How many copies of a buffer the runtime keeps, and which one an op uses.
enum class Instances : uint8_t {
  one,        // a single tensor, reused
  per_layer,  // one per decoder layer: an op uses its layer's (layer -1: every layer's)
  per_pass,   // two: the ops of the n-th pass (distinct layer and phase, in id order)
              // that uses the buffer use copy n mod 2
};
inline constexpr int kInstancesCount = 3;

// What a buffer holds; the runtime seeds inputs and checks results by role.
enum class BufferRole : uint8_t {
  q, kv, o, lse, d_o, dq, dkv,  // attention's own tensors, in the ring's token layout
  kv_slot, dkv_slot,            // ring receive slots (double buffering), dK/dV partials
  exchange,                     // all-to-all / shuffle staging, in another token layout
  index, index_work,            // a built sparse index, and what building it exchanges
  activation, weight, gradient,  // the dense parts of the layer and the optimizer
};
inline constexpr int kBufferRoleCount = 15;

// How the causal mask meets an attention op's (query set x key set).
enum class Mask : uint8_t {
  full,    // every pair is allowed (all keys precede all queries): no masking
  causal,  // the causal mask cuts the tile set: keep pairs with key <= query
  empty,   // no pair is allowed: the op computes nothing
};
inline constexpr int kMaskCount = 3;

// Which sparse index applies to an attention op.
enum class IndexSource : uint8_t {
  none,     // dense (under the mask)
  pattern,  // the experiment's pattern for the op's layer and heads
  built,    // the `index` buffer among the op's reads, built by index_build ops
};
inline constexpr int kIndexSourceCount = 3;

std::string_view to_string(OpKind k);
std::string_view to_string(Phase p);
std::string_view to_string(StreamKind k);
std::string_view to_string(DType t);
std::string_view to_string(Instances i);
std::string_view to_string(BufferRole r);
std::string_view to_string(Mask m);
std::string_view to_string(IndexSource i);
std::optional<OpKind> parse_op_kind(std::string_view s);
std::optional<Phase> parse_phase(std::string_view s);
std::optional<StreamKind> parse_stream_kind(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);
std::optional<Instances> parse_instances(std::string_view s);
std::optional<BufferRole> parse_buffer_role(std::string_view s);
std::optional<Mask> parse_mask(std::string_view s);
std::optional<IndexSource> parse_index_source(std::string_view s);
int64_t dtype_bytes(DType t);

bool is_compute(OpKind k);
bool is_p2p(OpKind k);         // send, recv
bool is_collective(OpKind k);

struct Stream {
  int id = 0;
  StreamKind kind = StreamKind::compute;
  std::string name;  // unique on its rank; Timelines show it as the thread name
  bool operator==(const Stream&) const = default;
};

struct Rank {
  int id = 0;
  int gpu = 0;  // global GPU index in the Topology
  std::vector<Stream> streams;
  bool operator==(const Rank&) const = default;
};

struct Group {
  int id = 0;
  std::vector<int> ranks;  // members, distinct
  std::string name;        // e.g. "cp0", "dp"; free
  // Only in a replica-symmetric Schedule (ReplicaSymmetry): the group stands for its
  // members and their images in every other replica; a collective over it is the call
  // over all of them (members ascending, within replica 0).
  bool spans_replicas = false;
  bool operator==(const Group&) const = default;
};

// Data-parallel symmetry (sim/engine/symmetry.hpp, docs/engines.md): the Schedule
// holds replica 0 of `replicas` identical replicas. Replica k's rank r is rank
// r + k * ranks_per_replica on GPU gpu + k * ranks_per_replica; its ops are replica
// 0's with the same times. Only the engines read it (the analytic one runs it; the
// SimGrid one refuses); Schedule files never carry it. replicas == 1: an ordinary Schedule.
struct ReplicaSymmetry {
  int replicas = 1;
  int ranks_per_replica = 0;
  bool operator==(const ReplicaSymmetry&) const = default;
};

// A tensor on one rank (in `instances` copies).
struct Buffer {
  int id = 0;
  int rank = 0;
  std::string name;  // unique on its rank
  BufferRole role = BufferRole::activation;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;  // dims, outermost first; every dim >= 1
  Instances instances = Instances::one;
  int64_t elements() const;
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
  bool operator==(const Buffer&) const = default;
};

// Token positions within one sequence, as the partitions produce them: runs of
// `len` tokens, `count` of them, `stride` apart. Local order is run order.
struct TokenRun {
  int64_t begin = 0, len = 0, stride = 0, count = 1;
  bool operator==(const TokenRun&) const = default;
};
struct TokenSet {
  std::vector<TokenRun> runs;
  int64_t size() const;
  int64_t end() const;  // one past the largest token; 0 when empty
  bool operator==(const TokenSet&) const = default;
};

// The buffers an op reads and writes (ids into Schedule::buffers, all on the
// op's rank). An attention op merges its partial output into its written
// accumulators unless it is the pass's first (Attention::merge).
struct Access {
  std::vector<int> reads, writes;
  bool operator==(const Access&) const = default;
};

// What an attn_fwd / attn_bwd op computes: its queries against its keys, for
// query heads [head_begin, +heads) and KV heads [kv_head_begin, +kv_heads).
struct Attention {
  int q_tokens = -1, kv_tokens = -1;  // ids into Schedule::token_sets
  int head_begin = 0, heads = 0, kv_head_begin = 0, kv_heads = 0;
  Mask mask = Mask::causal;
  IndexSource index = IndexSource::none;
  bool merge = false;  // false: initialise O/LSE (dQ) rather than merge into them
  bool operator==(const Attention&) const = default;
};

struct Gemm {
  int64_t m = 0, n = 0, k = 0;  // output rows, output columns, reduction
  bool operator==(const Gemm&) const = default;
};

// What an op costs and which data it touches. Ops share entries: a Schedule
// keeps each distinct one once (Schedule::descs) and an op names its entry, so
// that an Op stays at 48 bytes with its dependencies.
struct OpDesc {
  double flops = 0.0;   // useful FLOPs the op performs
  int64_t blocks = 0;   // attention kernel tiles (Bq x Bk) computed; 0 when not tiled
  int64_t tokens = 0;   // query tokens processed
  int64_t bytes = 0;    // send/recv: message; collectives: see docs/schedule-format.md; compute: HBM traffic
  int32_t access = -1;  // index into Schedule::accesses; -1: none
  int32_t detail = -1;  // attn_fwd/attn_bwd: Schedule::attentions; gemm: Schedule::gemms; -1: none
  bool operator==(const OpDesc&) const = default;
};
inline const OpDesc kNoDesc{};  // what an op with desc -1 costs: nothing, and it names no data

// Fields in the order the run plan, the matching and the engines read them
// (identity, stream, kind, run, peer/group/tag, deps first). Ids, tags and
// steps are held in 32 bits, streams and layers in 16 (the builder and the
// readers check the ranges): 48 bytes.
struct Op {
  int32_t id = 0;  // an OpId below kMaxOps
  int32_t rank = 0;
  int16_t stream = 0;
  int16_t layer = -1;  // -1: outside the decoder layers (embedding, loss, optimizer)
  OpKind kind = OpKind::gemm;
  Phase phase = Phase::forward;
  bool joined = false;  // p2p launched together with the previous op of its stream
  int32_t step = -1;    // ring step; -1: not a ring-step op
  // communication descriptors
  int32_t peer = -1;   // send: receiver; recv: sender; broadcast: root; else -1
  int32_t group = -1;  // collectives: the group; else -1
  int32_t tag = 0;     // separates otherwise identical p2p pairs / collective calls
  int32_t desc = -1;   // its costs and data: index into Schedule::descs (-1: kNoDesc)
  DepList deps;        // ops on the same rank that must end before this starts
  bool operator==(const Op&) const = default;
};
static_assert(sizeof(Op) == 48);
// The ranges the narrow fields hold (readers refuse values outside them).
inline constexpr int64_t kMaxStreams = INT16_MAX, kMaxLayer = INT16_MAX, kMinTag = INT32_MIN, kMaxTag = INT32_MAX;

// op's entry among `descs` (a streamed chunk's own table), kNoDesc for desc -1.
inline const OpDesc& desc_in(std::span<const OpDesc> descs, const Op& op) {
  return op.desc >= 0 ? descs[size_t(op.desc)] : kNoDesc;
}

struct Schedule {
  nlohmann::json experiment = nlohmann::json::object();  // the experiment it came from, verbatim
  std::string generator;  // which generator built it, e.g. "stripe-hierarchical" (docs/generators.md)
  std::vector<Rank> ranks;
  std::vector<Group> groups;
  std::vector<Op> ops;
  std::vector<OpDesc> descs;  // the ops' costs and data descriptors (Op::desc), each distinct entry once
  // Data descriptors (empty in a costable-only Schedule); ops refer to them by index.
  std::vector<Buffer> buffers;  // buffers[i].id == i
  std::vector<TokenSet> token_sets;
  std::vector<Access> accesses;
  std::vector<Attention> attentions;
  std::vector<Gemm> gemms;
  ReplicaSymmetry symmetry;  // replicas == 1 unless generated with the data-parallel shortcut

  // nullptr when the rank or stream does not exist.
  const Stream* find_stream(int rank, int stream) const;
  // The op's costs and data descriptors (kNoDesc for desc -1 or out of range).
  const OpDesc& desc(const Op& op) const {
    return op.desc >= 0 && size_t(op.desc) < descs.size() ? descs[size_t(op.desc)] : kNoDesc;
  }
  // Gives op the entry d, appended (builders and readers intern: equal entries shared).
  void set_desc(Op& op, const OpDesc& d) {
    op.desc = static_cast<int32_t>(descs.size());
    descs.push_back(d);
  }
  // nullptr when the op has no such descriptor (or its index is out of range).
  const Access* access_of(const Op& op) const { return access_of(desc(op)); }
  const Attention* attention_of(const Op& op) const { return attention_of(op.kind, desc(op)); }
  const Gemm* gemm_of(const Op& op) const { return gemm_of(op.kind, desc(op)); }
  // The same for an op whose entry is d (a streamed chunk keeps its own entries).
  const Access* access_of(const OpDesc& d) const;
  const Attention* attention_of(OpKind kind, const OpDesc& d) const;
  const Gemm* gemm_of(OpKind kind, const OpDesc& d) const;
  // Equal when everything is, each op with the same costs and data descriptors
  // (whichever entries of `descs` they name). A new field goes into it too.
  bool operator==(const Schedule& o) const;
};

// "op 17 (rank 2 stream 'compute', attn_fwd forward layer 3 step 1)"; used in
// every message that names an op. Safe on out-of-range fields and ids.
std::string describe(const Schedule& s, OpId op);

}  // namespace rm::schedule
