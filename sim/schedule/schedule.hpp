// The Schedule IR: what each rank does, on which stream, in which order,
// depending on what — compute ops with cost descriptors, communication ops
// with bytes and peer or group, explicit dependencies. It says what, never how
// long: the cost model and engines add time, the runtime executes it.
// Ids are dense: ranks[i].id == i, ranks[r].streams[s].id == s,
// groups[g].id == g, ops[i].id == i (validate() checks it).
// Stream order is op id order: a stream runs its ops one at a time, by id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

std::string_view to_string(OpKind k);
std::string_view to_string(Phase p);
std::string_view to_string(StreamKind k);
std::optional<OpKind> parse_op_kind(std::string_view s);
std::optional<Phase> parse_phase(std::string_view s);
std::optional<StreamKind> parse_stream_kind(std::string_view s);

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
  bool operator==(const Group&) const = default;
};

struct Op {
  OpId id = 0;
  int rank = 0;
  int stream = 0;
  OpKind kind = OpKind::gemm;
  Phase phase = Phase::forward;
  int layer = -1;  // -1: outside the decoder layers (embedding, loss, optimizer)
  int step = -1;   // ring step; -1: not a ring-step op
  // compute cost descriptors
  double flops = 0.0;      // useful FLOPs the op performs
  int64_t blocks = 0;      // attention kernel tiles (Bq x Bk) computed; 0 when not tiled
  int64_t tokens = 0;      // query tokens processed
  // communication cost descriptors
  int64_t bytes = 0;       // send/recv: message; collectives: see docs/schedule-format.md
  int peer = -1;           // send: receiver; recv: sender; broadcast: root; else -1
  int group = -1;          // collectives: the group; else -1
  int64_t tag = 0;         // separates otherwise identical p2p pairs / collective calls
  bool joined = false;     // p2p launched together with the previous op of its stream
  std::vector<OpId> deps;  // ops on the same rank that must end before this starts
  bool operator==(const Op&) const = default;
};

struct Schedule {
  nlohmann::json experiment = nlohmann::json::object();  // the experiment it came from, verbatim
  std::string generator;  // which generator built it, e.g. "hierarchical_ring"
  std::vector<Rank> ranks;
  std::vector<Group> groups;
  std::vector<Op> ops;

  // nullptr when the rank or stream does not exist.
  const Stream* find_stream(int rank, int stream) const;
  bool operator==(const Schedule&) const = default;
};

// "op 17 (rank 2 stream 'compute', attn_fwd forward layer 3 step 1)"; used in
// every message that names an op. Safe on out-of-range fields and ids.
std::string describe(const Schedule& s, OpId op);

}  // namespace rm::schedule
