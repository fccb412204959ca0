// The only door to SimGrid: every SimGrid call of ringmaster is in
// simgrid_wrapper.cpp, so a SimGrid upgrade (4.x renamed much of S4U) is a
// change to one file. It offers what the SimGrid engine needs and no more:
// hosts, links, one-way routes, actors, asynchronous executions and
// transfers awaited one at a time, and a clock. One Simulation per process
// (SimGrid's engine is a process-wide singleton whose clock does not restart).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rm::engine::sg {

class Simulation {
 public:
  // Network model: CM02 (max-min fair sharing, no TCP latency/bandwidth
  // factors, no cross-traffic), so a flow alone on its route takes
  // latency + bytes / bottleneck bandwidth. SimGrid's logging is silenced.
  Simulation();
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Platform building (before run()); returns ids.
  int add_host(const std::string& name, double flops_per_s);
  // shared: flows crossing the link share its bandwidth; otherwise each gets all of it.
  int add_link(const std::string& name, double bytes_per_s, double latency_s, bool shared = true);
  void add_route(int src_host, int dst_host, const std::vector<int>& links);  // src -> dst only

  // Actors; callable before run() and from inside actors.
  void spawn(const std::string& name, int host, std::function<void()> body);
  void run();  // until no actor is left (or all remaining ones are blocked forever)

  // From inside actors.
  double now() const;

  // Asynchronous activities, started and awaited by one actor. Each carries
  // the caller's tag; wait_next blocks until one of the started activities
  // ends and returns its tag (of those ending together, the one started
  // first). Activities run concurrently: transfers crossing a shared link
  // share it max-min fairly.
  void start_execute(int host, double flops, int64_t tag);
  void start_transfer(int src_host, int dst_host, double bytes, int64_t tag);
  size_t in_flight() const;  // started and not yet returned by wait_next
  int64_t wait_next();       // requires in_flight() > 0

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rm::engine::sg
