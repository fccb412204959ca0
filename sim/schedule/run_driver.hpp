// How a Schedule runs, defined once: both engines, the deadlock check, the
// critical path's edges and the runtime execute a Schedule through this driver.
//   - A stream runs its ops in id order, one run at a time; a run is an op and
//     the p2p ops joined to it, launched ("posted") together once every op of
//     the run has its dependencies ended and the stream's previous run ended.
//   - A send/recv pair transfers once both sides are posted; a collective call
//     starts once every member is posted. Ops end when the backend says so.
// The backend owns the clock and the work: the driver tells it what to start
// and takes completions back. A completion may arrive from inside a start hook
// (a zero-time backend): the driver queues it and handles it as soon as the
// hook returns, in the order it would have by recursion, on its own stack, so
// 400K-op schedules cannot overflow the call stack.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

// Each stream's ops in id order, in one flat array (CSR): streams[k] is a view.
struct StreamOps {
  std::vector<int64_t> begin{0};  // size streams + 1
  std::vector<OpId> ops;
  size_t size() const { return begin.size() - 1; }
  std::span<const OpId> operator[](size_t k) const {
    return {ops.data() + begin[k], static_cast<size_t>(begin[k + 1] - begin[k])};
  }
};

// What the driver reads from a Schedule, built once, in two passes over the
// ops and flat arrays only (it is on the path of every simulation). Streams
// are numbered by their first op id.
struct RunPlan {
  explicit RunPlan(const Schedule& s);
  RunPlan(const Schedule& s, CommMatching m);

  enum class Role : uint8_t { compute, p2p, collective };
  CommMatching match;
  StreamOps streams;                       // per stream: its ops, id order
  std::vector<int32_t> stream_of;          // per op: index into streams
  std::vector<int32_t> run_length;         // per op: ops in the run it heads (0: not a head)
  std::vector<int64_t> dependents_begin;   // CSR of the ops listing each op as a dep, size ops + 1
  std::vector<OpId> dependents;
  std::vector<int32_t> dep_count;          // per op: its deps
  std::vector<Role> role;                  // per op
};

// What a backend does when the driver says so. Each hook may call
// RunDriver::complete for any op, at once or later.
class RunBackend {
 public:
  virtual ~RunBackend() = default;
  virtual void post(OpId op) = 0;                    // op's run launched: op starts now
  virtual void start_compute(OpId op) = 0;
  virtual void start_p2p(OpId op, OpId partner) = 0;  // both posted; op's start completed the pair
  virtual void start_collective(int64_t call) = 0;   // plan.match.calls[call]: every member posted
};

class RunDriver {
 public:
  // plan and backend must outlive the driver.
  RunDriver(const RunPlan& plan, RunBackend& backend);

  void start();            // launches every stream's first run that can launch
  void complete(OpId op);  // the backend: op has ended; once per op, after its post (else std::logic_error)

  // Progress, for backends and diagnostics.
  bool posted(OpId op) const { return (state_[static_cast<size_t>(op)] & kPosted) != 0; }
  bool done(OpId op) const { return (state_[static_cast<size_t>(op)] & kDone) != 0; }
  int64_t ops_done() const { return done_count_; }
  size_t head(size_t stream) const { return head_[stream]; }  // index of its first op not yet ended
  bool run_launched(size_t stream) const { return run_left_[stream] > 0; }
  // Throws ScheduleError naming the first op that never ended (s: the plan's Schedule).
  void check_finished(const Schedule& s) const;

 private:
  enum : uint8_t { kPosted = 1, kDone = 2, kTransfer = 4 };
  // The recursion of launch(stream) -> start ops -> complete(op) -> launch(...),
  // kept on the heap: a frame completes an op or launches a stream's run.
  struct Frame {
    int64_t what;    // op or stream
    int64_t cursor;  // complete: next dependent; launch: next op of the run (-1: not yet launched)
    int64_t end;     // launch: one past the run's last op
    bool launch;
  };
  void drain();
  void start_op(OpId op);
  void push_pending();

  const RunPlan& p_;
  RunBackend& b_;
  std::vector<int32_t> deps_left_;
  std::vector<uint8_t> state_;
  std::vector<size_t> head_, run_left_, arrived_;
  std::vector<Frame> stack_;
  std::vector<OpId> pending_;  // completions reported from inside a hook
  bool draining_ = false;
  int64_t done_count_ = 0;
};

}  // namespace rm::schedule
