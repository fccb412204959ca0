// PyTorch profiler (Kineto) traces, imported as a measured Timeline with the
// typed edges that can be inferred from them, for `ringmaster replay` (which
// turns them into a Schedule: sim/replay/) and for comparison with our own
// predictions. One file per rank, gzip or plain, as PyTorch writes them
// across versions; docs/kineto.md lists every field read and how it is used.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/timeline.hpp"

namespace rm::traces {

// CPU threads get stream numbers from here up (kKinetoCpuStreamBase + i, i in
// order of first appearance on the rank); GPU streams keep their CUDA stream
// id, which is far below. stream_names say which thread or stream each is.
inline constexpr int kKinetoCpuStreamBase = 1 << 20;

// What the trace says (or the kernel name implies) about one NCCL kernel.
struct KinetoCollective {
  // "allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast",
  // "reduce", "send", "recv", "sendrecv" (PyTorch's spelling), or "unknown"
  std::string kind;
  bool inferred = false;         // kind taken from the kernel name: no "Collective name" field
  int64_t in_nelems = -1;        // -1: not recorded
  int64_t out_nelems = -1;
  std::string dtype;             // as recorded ("Float", "BFloat16", ...); empty: not recorded
  int64_t bytes = 0;             // the buffer as nccl-tests counts it (docs/schedule-format.md); 0: unknown
  int group_size = 0;            // 0: not recorded
  std::string process_group;     // "Process Group Name"; empty: not recorded
  std::vector<int> group_ranks;  // global ranks of the group; empty: not recorded
  int64_t seq = 0;               // 0-based call order among this rank's calls on its process group
  bool operator==(const KinetoCollective&) const = default;
};

// One `ProfilerStep#N` annotation (CPU side) on one rank.
struct KinetoStep {
  std::string name;  // "ProfilerStep#4"
  int number = 0;    // 4
  int rank = 0;
  double start_s = 0, end_s = 0;  // on the Timeline's clock
  bool operator==(const KinetoStep&) const = default;
};

struct KinetoRank {
  int rank = 0;
  int world_size = 0;   // distributedInfo.world_size; 0: not recorded (a single-GPU trace)
  std::string file;
  std::string backend;  // distributedInfo.backend ("nccl"); empty: not recorded
  int64_t json_bytes = 0;    // the file's JSON text (after gunzip), in bytes
  int64_t trace_events = 0;  // entries of its traceEvents, kept or not
  bool operator==(const KinetoRank&) const = default;
};

struct KinetoImport {
  // source kineto. Every kept event has a unique op id (>= 0) so edges can
  // join them; events[i].op == i (files in rank order, then file order): GPU
  // kernels, memcpys and memsets (category "kernel", "gpu_memcpy",
  // "gpu_memset") on their CUDA stream; CPU ops, runtime calls and
  // annotations ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation",
  // "python_function") on their thread's stream. Times in seconds from the
  // earliest event of all files. Edges, by kind in this order: stream
  // (consecutive GPU events of a stream), launch, sync, collective (one NCCL
  // call's kernels across the recorded ranks, matched by process group and
  // seq). metadata: "files", "world_size", "clock_zero_ns".
  Timeline timeline;
  std::map<int64_t, KinetoCollective> collectives;  // by the NCCL kernel's op id
  std::vector<KinetoStep> steps;                    // by rank, then start
  std::vector<KinetoRank> ranks;                    // by rank
  std::set<StreamKey> gpu_streams;                  // every other stream is a CPU thread
  // Events not imported, by kind ("ph X cat foo", "ph i", ...) and count:
  // reported, never fatal.
  std::map<std::string, int64_t> skipped;
};

// Reads one or several files of one job (one per rank). Throws TraceError
// naming the file and the event (index, name) for a malformed or missing
// field, a file with no GPU event, two files of one rank, or files of
// different jobs (world sizes or process groups that disagree).
KinetoImport read_kineto(const std::vector<std::string>& paths);

// The same from text already in memory; `name` stands for the file in messages.
KinetoImport parse_kineto(const std::vector<std::pair<std::string, std::string>>& name_and_text);

// NCCL kernels, as read_kineto reads them (public for tests and for replay).
// The kind a kernel name implies ("ncclKernel_AllReduce_RING_LL_Sum_float(...)",
// "ncclDevKernel_SendRecv(...)" -> "allreduce", "sendrecv"); "" when the name
// is no NCCL kernel's, "unknown" for an NCCL kernel of no known kind.
std::string nccl_kind_from_kernel_name(std::string_view kernel);
// PyTorch's "Collective name" ("allreduce", "_allgather_base",
// "reduce_scatter_tensor_coalesced", "all_to_allv", ...) -> the kinds of
// KinetoCollective::kind; "unknown" when not recognised.
std::string nccl_kind_from_collective_name(std::string_view name);
// Bytes per element of a recorded dtype ("Float" 4, "BFloat16" 2, ...); 0: unknown.
int dtype_bytes(std::string_view dtype);
// KinetoCollective::bytes from its kind, element counts, dtype and group size; 0: unknown.
int64_t collective_bytes(const KinetoCollective& c);

// True when the text looks like a Kineto trace (has "traceEvents" and a
// Kineto marker such as "schemaVersion", "deviceProperties" or
// "distributedInfo") rather than one of our Timelines ("otherData.source").
bool looks_like_kineto(std::string_view text);

}  // namespace rm::traces
