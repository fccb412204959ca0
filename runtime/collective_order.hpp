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
  // This process's op in call `call`; -1 when it takes no part (the last one when it holds several).
  schedule::OpId local_op(int64_t call) const { return local_op_[size_t(call)]; }
  // Call `call` (one with a local op) is ready; returns the calls to issue now, in order.
  std::vector<int64_t> ready(int64_t call);

 private:
  const schedule::Schedule& s_;
  std::vector<schedule::OpId> local_op_;       // per call
  std::map<int, std::vector<int64_t>> calls_;  // per group: this process's calls, in call order
  std::map<int, size_t> next_;
  std::vector<uint8_t> ready_;
};

}  // namespace rm::runtime
