// One Kineto file as read in a single streaming pass (traces/kineto_read.cpp):
// the events read_kineto keeps, the records it infers edges from (cuda_sync
// events, ac2g flows, thread names) and the file's header fields, checked
// and typed but not yet joined across files (traces/kineto.cpp does that).
// Internal to traces/: not part of the public Kineto interface.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/kineto.hpp"

namespace rm::traces::kineto_raw {

enum class Kind : uint8_t { kernel, memcpy, memset, cpu };

struct RawEvent {
  int64_t index = 0;     // position in traceEvents (for messages)
  Kind kind = Kind::cpu;
  std::string name;
  std::string category;  // the modern spelling ("kernel", "cpu_op", ...)
  std::string thread;    // "pid/tid" as written: the CPU thread, or the GPU row flows point at
  std::string tid;       // tid as written (CPU stream names)
  int stream = 0;        // GPU events: the CUDA stream
  int64_t start_ns = 0;  // absolute: baseTimeNanoseconds + ts
  int64_t dur_ns = 0;
  int64_t correlation = -1;  // -1: none
  int64_t bytes = 0;
  std::optional<KinetoCollective> nccl;  // NCCL kernels (seq filled later)
};

// A "cuda_sync" event: what a CPU call or a stream waited for.
struct RawSync {
  int64_t index = 0;
  std::string kind;            // args.cuda_sync_kind, else the name ("Stream Sync", ...)
  int64_t correlation = -1;    // the CPU runtime call's
  int stream = -1;             // the stream that waits (Stream Wait Event) or is synced (Stream Sync)
  int wait_on_stream = -1;     // where the awaited event was recorded
  int64_t record_correlation = -1;  // the cudaEventRecord call's correlation
};

// One end of an "ac2g" flow (ph "s" on the CPU side, "f" on the GPU side).
struct RawFlow {
  bool start = false;
  int64_t id = 0;
  std::string thread;  // "pid/tid"
  int64_t ts_ns = 0;
};

struct PgConfig {
  std::string name, desc;
  int64_t size = 0;
  std::vector<int64_t> ranks;
  bool operator==(const PgConfig&) const = default;
};

struct RawFile {
  std::string name;
  bool has_distributed_info = false;
  int rank = 0;
  int world_size = 0;
  std::string backend;
  std::vector<PgConfig> pg_config;
  int64_t base_ns = 0;  // baseTimeNanoseconds; 0: absent (ts are Unix microseconds)
  std::vector<RawEvent> events;
  std::vector<RawSync> syncs;
  std::vector<RawFlow> flows;
  std::map<std::string, std::string> thread_names;  // "pid/tid" -> M thread_name
  std::map<std::string, int64_t> skipped;
  int64_t json_bytes = 0;    // text read (after gunzip)
  int64_t trace_events = 0;  // traceEvents entries
};

// Reads a file (gzip recognised by its magic bytes) or text in memory in one
// streaming pass. Throws TraceError naming `name` (and the event) on any
// malformed input.
RawFile read_raw_file(const std::string& path);
RawFile read_raw_text(std::string_view text, const std::string& name);

// The edges inferred within one file (traces/kineto_edges.cpp); `ops[i]` is
// the op id given to file.events[i]. cuda_sync kinds not understood are
// counted in `skipped` ("cuda_sync KIND").
struct FileEdges {
  std::vector<Edge> stream, launch, sync;
  std::map<std::string, int64_t> skipped;
};
FileEdges infer_file_edges(const RawFile& file, const std::vector<int64_t>& ops);

// Exposed for tests: a JSON number's text in microseconds -> nanoseconds,
// exactly (rounded half up past the nanosecond); nullopt when out of range.
std::optional<int64_t> decimal_us_to_ns(std::string_view text);

}  // namespace rm::traces::kineto_raw
