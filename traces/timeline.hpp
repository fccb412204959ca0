// The Timeline: what happened (measured) or is predicted to happen, as timed
// events per rank and stream, and typed edges saying what waited for what.
// Engines and the runtime produce it, trace readers import it, compare,
// calibrate and the critical path consume it. It knows no Schedule: an event
// carries the Schedule op id as a plain integer (-1 when none), and edges join
// op ids (a reader that infers edges gives the events it links op ids).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace rm::traces {

// Who made the Timeline. Written as a string in the trace's metadata block.
enum class Source { analytic, simgrid, runtime_cpu, runtime_cuda, kineto };
std::string_view to_string(Source s);                    // "runtime-cpu", ...
std::optional<Source> parse_source(std::string_view s);  // inverse; nullopt if unknown

struct Event {
  int64_t op = -1;       // Schedule op id; -1 when the event maps to no op
  int rank = 0;          // pid in Chrome traces
  int stream = 0;        // tid in Chrome traces
  std::string name;      // shown on the slice
  std::string category;  // op kind ("attn_fwd", "send") or trace category ("kernel")
  double start_s = 0.0;
  double end_s = 0.0;
  int layer = -1;        // -1: not given
  std::string phase;     // "forward", "backward", "recompute", ...; empty: not given
  int step = -1;         // ring step; -1: not given
  int64_t bytes = 0;     // 0: not given
  double flops = 0.0;    // 0: not given
  // A measured Timeline's repeated iterations (runtime/measured_timeline.hpp):
  // times are the medians over `samples` iterations, and spread_s is the max
  // minus the min of the op's duration over them. 0 / 0: not a repeated measurement.
  int samples = 0;
  double spread_s = 0.0;

  double duration_s() const { return end_s - start_s; }
  bool operator==(const Event&) const = default;
};

// Why one op waited for another (HolisticTraceAnalysis's critical-path graph
// has the same idea with GPU-side kinds).
enum class EdgeKind : uint8_t {
  stream,      // same stream: `to` launched after `from`, the previous run, ended
  dependency,  // an explicit dependency: `to` started after `from` ended
  p2p,         // a matched send (`from`) and recv (`to`): they transfer together
  collective,  // members of one collective call: the call starts once all are posted
  // Kinds only trace importers infer (traces/kineto.hpp); engines never emit them.
  launch,      // a CPU launch (cudaLaunchKernel, cudaMemcpyAsync, ...) -> the GPU event it launched
  sync,        // a GPU event -> what waited for it to end: a CPU synchronize call, or
               // (cudaStreamWaitEvent) the first GPU event after the wait on another stream
};
inline constexpr int kEdgeKindCount = 6;
// The kinds the engines and the runtime emit (the first four).
inline constexpr int kScheduleEdgeKindCount = 4;
std::string_view to_string(EdgeKind k);
std::optional<EdgeKind> parse_edge_kind(std::string_view s);

struct Edge {
  int64_t from = -1;  // op ids
  int64_t to = -1;
  EdgeKind kind = EdgeKind::stream;
  bool operator==(const Edge&) const = default;
};

// Canonical event order: rank, stream, start, end, op, name.
bool canonical_less(const Event& a, const Event& b);

struct StreamKey {
  int rank = 0;
  int stream = 0;
  auto operator<=>(const StreamKey&) const = default;
};

struct Timeline {
  Source source = Source::analytic;
  nlohmann::json metadata = nlohmann::json::object();  // free keys: experiment name, step_time_s, ...
  std::map<int, std::string> rank_names;               // optional; default "rank N"
  std::map<StreamKey, std::string> stream_names;       // optional; default "stream N"
  std::vector<Event> events;
  std::vector<Edge> edges;  // in the producer's order (kept by sort() and by files)

  void sort();  // into canonical order, which writers emit

  double begin_s() const;    // earliest start; 0 when empty
  double end_s() const;      // latest end; 0 when empty
  double makespan_s() const; // end_s() - begin_s()

  std::vector<int> ranks() const;            // ascending, each once
  std::vector<StreamKey> streams() const;    // ascending, each once
  // Views in start order; the pointers live as long as `events` is unchanged.
  std::vector<const Event*> on_rank(int rank) const;
  std::vector<const Event*> on_stream(int rank, int stream) const;

  std::string rank_name(int rank) const;     // rank_names or "rank N"
  std::string stream_name(int rank, int stream) const;  // stream_names or "stream N"

  bool operator==(const Timeline&) const = default;
};

// Relative tolerance that times keep through a Chrome-trace round trip
// (seconds -> microseconds -> seconds costs a few ulps).
inline constexpr double kTimeRoundTripRelTol = 1e-14;

// Equal up to kTimeRoundTripRelTol on times and spreads (absolute floor 1e-18 s), exactly
// elsewhere (edges too, in order); events compared in canonical order.
bool approx_equal(const Timeline& a, const Timeline& b);

}  // namespace rm::traces
