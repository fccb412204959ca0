// One order of collective calls per communicator. MPI and NCCL both require
// every member to issue a communicator's collectives in the same order, while
// the run driver may make a later call ready first (they sit on different
// streams). Each Schedule group is one communicator; its calls are issued in
// call order (CommMatching::calls), a ready call waiting for the ones before it.
// Both backends use this gate.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

class CollectiveOrder {
 public:
  // `local(op)`: whether this process issues op (its calls are the ones gated).
  CollectiveOrder(const schedule::Schedule& s, const schedule::CommMatching& m,
                  const std::function<bool(schedule::OpId)>& local);
  void reset();  // before each run
  // Call `call` (on group `group`) is ready; returns the calls to issue now, in order.
  std::vector<int64_t> ready(int group, int64_t call);

 private:
  std::map<int, std::vector<int64_t>> calls_;  // per group: this process's calls, in call order
  std::map<int, size_t> next_;
  std::vector<uint8_t> ready_;
};

}  // namespace rm::runtime
