#include "runtime/collective_order.hpp"

namespace rm::runtime {

CollectiveOrder::CollectiveOrder(const schedule::Schedule& s, const schedule::CommMatching& m,
                                 const std::function<bool(schedule::OpId)>& local)
    : s_(s), local_op_(m.calls.size(), -1), ready_(m.calls.size(), 0) {
  for (size_t c = 0; c < m.calls.size(); ++c) {
    for (schedule::OpId id : m.calls[c])
      if (id >= 0 && local(id)) local_op_[c] = id;
    // One entry per call, even when this process holds several members (emulation).
    if (local_op_[c] >= 0) calls_[s.ops[size_t(local_op_[c])].group].push_back(int64_t(c));
  }
}

void CollectiveOrder::reset() {
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& [g, n] : next_) n = 0;
}

std::vector<int64_t> CollectiveOrder::ready(int64_t call) {
  const int group = s_.ops[size_t(local_op_.at(size_t(call)))].group;
  ready_[size_t(call)] = 1;
  std::vector<int64_t> out;
  const auto& calls = calls_.at(group);
  size_t& next = next_[group];
  while (next < calls.size() && ready_[size_t(calls[next])]) out.push_back(calls[next++]);
  return out;
}

}  // namespace rm::runtime
