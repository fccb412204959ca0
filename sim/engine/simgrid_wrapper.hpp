// The only door to SimGrid: every SimGrid call of ringmaster is in
// simgrid_wrapper.cpp, so a SimGrid upgrade (4.x renamed much of S4U) is a
// change to one file. It offers what the SimGrid engine needs and no more:
// hosts, links, one-way routes, actors, blocking executions and transfers,
// a clock and condition waits. One Simulation per process (SimGrid's engine
// is a process-wide singleton whose clock does not restart).
#pragma once

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
  void execute(int host, double flops);                     // blocks until done
  void transfer(int src_host, int dst_host, double bytes);  // blocks until received

  // A condition actors wait on until a predicate holds; notify after changing
  // what predicates read.
  class Condition {
   public:
    Condition();
    ~Condition();
    void wait_until(const std::function<bool()>& ready);
    void notify_all();

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rm::engine::sg
