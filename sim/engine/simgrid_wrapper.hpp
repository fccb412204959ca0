// The only door to SimGrid: every SimGrid call of ringmaster is in
// simgrid_wrapper.cpp, so a SimGrid upgrade (4.x renamed much of S4U) is a
// change to one file. It offers what the SimGrid engine needs and no more:
// hosts, links, one-way routes, one driving actor, asynchronous transfers,
// an alarm for the driver's own events, and a clock. One Simulation per
// process (SimGrid's engine is a process-wide singleton whose clock does not
// restart).
//
// SimGrid carries only the flows. The driver keeps its own events (compute
// ends, whose durations it knows) and tells SimGrid the next one as an alarm:
// the clock steps to exactly that date, as it stepped to an execution's end
// when compute ran as SimGrid executions, so every clock value is the same.
// Completion without scanning: SimGrid reports each transfer's end through a
// link-state signal (in the order it ends them) and each clock step through a
// time-advance signal; the driver is woken only at steps where a transfer ended
// or its alarm is due, and is told which transfers ended.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rm::engine::sg {

class Simulation {
 public:
  // alarm: as above. wait_any: the way the engine ran before, kept as the
  // test oracle for it: the driver's events are SimGrid executions too, and
  // every activity is awaited through Activity::wait_any over all of them.
  enum class Mode { alarm, wait_any };

  // Network model: CM02 (max-min fair sharing, no TCP latency/bandwidth
  // factors, no cross-traffic), so a flow alone on its route takes
  // latency + bytes / bottleneck bandwidth. SimGrid's logging is silenced.
  explicit Simulation(Mode mode = Mode::alarm);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Platform building (before run()); returns ids.
  int add_host(const std::string& name, double flops_per_s);
  // shared: flows crossing the link share its bandwidth; otherwise each gets all of it.
  int add_link(const std::string& name, double bytes_per_s, double latency_s, bool shared = true);
  void add_route(int src_host, int dst_host, const std::vector<int>& links);  // src -> dst only

  // The one driving actor; before run().
  void spawn(const std::string& name, int host, std::function<void()> body);
  void run();  // until the actor ends (or is blocked forever)

  // From inside the actor.
  double now() const;

  // An asynchronous transfer carrying the caller's tag. Transfers crossing a
  // shared link share it max-min fairly.
  void start_transfer(int src_host, int dst_host, double bytes, int64_t tag);
  size_t transfers_in_flight() const;  // started and not yet returned by wait

  // The driver's next own event, or -1 for none: the clock steps to exactly
  // `date` unless a transfer event comes first.
  void set_alarm(double date);
  // Whether an event at `date` ends at the current step: SimGrid ends every
  // activity whose end is within its timing precision (1e-9 s) of the clock.
  bool due(double date) const;
  // Blocks until a clock step at which transfers ended or the alarm is due;
  // returns the tags of the transfers that ended at that step, in the order
  // SimGrid ended them (valid until the next wait).
  const std::vector<int64_t>& wait();

  // Mode::wait_any only: an execution of `flops` on `host`, and the next
  // activity to end (of those ending together, the one SimGrid finished
  // first, then the others in start order), by tag; requires one in flight.
  void start_execute(int host, double flops, int64_t tag);
  size_t activities_in_flight() const;
  int64_t wait_any();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rm::engine::sg
