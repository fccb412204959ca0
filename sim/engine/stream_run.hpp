// Streaming: the analytic engine over a Schedule handed to it in chunks as the
// generator builds it (generate::generate_step_chunks), holding only the ops in
// flight. A chunk stays until every op of it and of the chunks before it has
// ended; then it goes to the caller (RetireSink: ops and times, in op order)
// and is freed. So a step too large to hold (4,096 GPUs at cp = 1,024: 545M ops
// per replica) runs in the memory of a few layers.
//
// Exact, or refused: the run takes every decision the whole-Schedule run
// (analytic.hpp) takes, in the same order, so each op's times are the same bit
// for bit — provided every op arrives before it could have started. The run
// stops before it would end an op of the newest chunk, asks for the next chunk
// and checks each op as it arrives: an op whose dependencies and stream
// predecessors had all ended already (it would have started in the past, and
// may have shared links with flows simulated without it) throws StreamNotExact.
// Generated steps cut at layer boundaries never do (tests/sim/stream_run_test.cpp
// compares every op's times with the whole run); ZeRO-3's parameter prefetch,
// which waits for nothing but its stream, would, and is refused that way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/schedule/op_events.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"

namespace rm::engine {

// The streamed run cannot be exact for this Schedule (see above); the message names the op.
class StreamNotExact : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A chunk whose ops have all ended, handed back in op order (ids ops[0].id, +1, ...):
// its ops and times are the sink's to keep (the run holds none of them after).
struct RetiredChunk {
  std::vector<schedule::Op> ops;
  std::vector<schedule::OpDesc> descs;  // the entries its ops name (Op::desc)
  std::vector<double> start, end;      // per op, seconds from 0
  double safe_before = 0;              // every op not yet handed back starts at or after it
  std::span<const schedule::Group> groups;  // the Schedule's groups so far, valid during the call
};
using RetireSink = std::function<void(RetiredChunk&&)>;

// A chunk made ready for StreamRun::append without the Schedule it came from, so
// the generator can run on a thread of its own ahead of the engine: its ops, each
// compute op's seconds, and what the run reads of the Schedule's frame.
struct ReadyChunk {
  std::vector<schedule::Op> ops;
  std::vector<schedule::OpDesc> descs;  // the entries its ops name (Op::desc)
  std::vector<double> compute_s;  // per op: CostModel::compute_seconds for a compute op, else 0
  // With the first chunk: per rank its GPU and stream count, and the symmetry.
  std::vector<int> rank_gpu, rank_streams;
  schedule::ReplicaSymmetry symmetry;
  std::vector<schedule::Group> new_groups;  // the Schedule's groups added since the chunk before
};

// Makes chunks ready, in order, on the generator's side (its thread if it has one).
class ChunkPreparer {
 public:
  explicit ChunkPreparer(const cost::CostModel& m) : m_(m) {}
  // meta: the Schedule so far without its ops (read during the call only).
  // Throws std::invalid_argument when its ranks change between chunks.
  // chunk: ops with their own entries (ScheduleBuilder::take_ops).
  ReadyChunk prepare(const schedule::Schedule& meta, schedule::OpChunk chunk);

 private:
  const cost::CostModel& m_;
  bool first_ = true;
  size_t ranks_ = 0, groups_ = 0;
};

class StreamRun {
 public:
  // t, m and sink must outlive the run.
  StreamRun(const topology::Topology& t, const cost::CostModel& m, RetireSink sink);
  ~StreamRun();
  StreamRun(const StreamRun&) = delete;
  StreamRun& operator=(const StreamRun&) = delete;

  // The next chunk: ops with ids continuing the last chunk's. meta is the
  // Schedule so far without its ops (ranks, streams, groups, symmetry and the
  // descriptor tables the ops refer to, Schedule::descs included); it is read
  // during the call only.
  // Runs the engine as far as it can go without the next chunk; with last, to
  // the end (throws schedule::ScheduleError naming an op that never ran).
  // Throws StreamNotExact (above), std::invalid_argument on ids out of order.
  void append(const schedule::Schedule& meta, std::vector<schedule::Op> ops, bool last);
  // The same with a chunk made ready by a ChunkPreparer (of this run's chunks, in order).
  void append(ReadyChunk chunk, bool last);

  struct Stats {
    int64_t ops = 0;            // appended
    int64_t chunks = 0;         // appended
    int64_t peak_ops_held = 0;  // the most ops held at once (chunks not yet retired)
    int64_t peak_path_nodes = 0;  // the most critical-path nodes alive at once (path_nodes.hpp)
  };
  const Stats& stats() const;

  // After the last chunk: the critical path as report::critical_chain gives it
  // on the whole run's op times, link for link; nullopt where the whole walk's
  // skipping of ops already on the path could have chosen otherwise
  // (path_nodes.hpp), which generated steps have not shown.
  // transfers, when given: each link's p2p transfer (schedule::PathTransfer), in the chain's order.
  std::optional<std::vector<schedule::PathLink>> critical_chain(
      std::vector<schedule::PathTransfer>* transfers = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rm::engine
