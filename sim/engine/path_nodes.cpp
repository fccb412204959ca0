#include "sim/engine/path_nodes.hpp"

#include <stdexcept>
#include <unordered_set>

namespace rm::engine {

PathNodes::Ref PathNodes::make(const schedule::PathLink& link, int64_t call, Ref parent,
                               const schedule::PathTransfer& transfer) {
  Ref r;
  if (!free_.empty()) {
    r = free_.back();
    free_.pop_back();
  } else {
    if (hot_.size() >= size_t(INT32_MAX)) throw std::length_error("stream run: too many critical-path nodes");
    r = Ref(hot_.size());
    hot_.emplace_back();
    cold_.emplace_back();
  }
  hot_[size_t(r)] = {link.end, parent, 1};
  cold_[size_t(r)] = {link, transfer, call};
  return r;
}

void PathNodes::unref(Ref r) {
  while (r >= 0 && --hot_[size_t(r)].refs == 0) {
    const Ref parent = hot_[size_t(r)].parent;
    free_.push_back(r);
    r = parent;
  }
}

std::optional<std::vector<schedule::PathLink>> PathNodes::chain(Ref last,
                                                                std::vector<schedule::PathTransfer>* transfers) const {
  std::vector<schedule::PathLink> out;
  if (transfers) transfers->clear();
  std::unordered_set<schedule::OpId> on_path;
  std::unordered_set<int64_t> calls;
  for (Ref r = last; r >= 0; r = hot_[size_t(r)].parent) {
    const Cold& n = cold_[size_t(r)];
    const Ref parent = hot_[size_t(r)].parent;
    if (n.call != kNoCall && !calls.insert(n.call).second) return std::nullopt;
    if (parent >= 0 && on_path.count(cold_[size_t(parent)].link.op)) return std::nullopt;
    on_path.insert(n.link.op);
    if (n.link.via >= 0) on_path.insert(n.link.via);
    out.push_back(n.link);
    if (transfers) transfers->push_back(n.transfer);
  }
  return out;
}

}  // namespace rm::engine
