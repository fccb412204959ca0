// The critical path of a streamed run (stream_run.hpp), traced as ops end
// instead of walked back over every op at the end: each ended op keeps a node
// naming what its start waited for last (its parent) and whose wait that was,
// exactly as report/critical_path.hpp's walk would choose it. Nodes are
// counted references: one lives while its op is held, while a later op may
// still choose it, or while a living node descends from it. The critical path
// is the chain from the op that ends last; the live nodes are the ops in
// flight and the few chains behind them, not the step.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/schedule/op_events.hpp"

namespace rm::engine {

class PathNodes {
 public:
  using Ref = int32_t;  // -1: none
  // The p2p pair or collective call an op belongs to (its partners), or none.
  static constexpr int64_t kNoCall = INT64_MIN;

  // A node for an ended op; it takes over the caller's reference to `parent`
  // and starts with one reference, the caller's.
  Ref make(const schedule::PathLink& link, int64_t call, Ref parent, const schedule::PathTransfer& transfer = {});
  void ref(Ref r) {
    if (r >= 0) ++hot_[size_t(r)].refs;
  }
  void unref(Ref r);  // frees the node at zero, then its parent's reference
  const schedule::PathLink& link(Ref r) const { return cold_[size_t(r)].link; }
  double end(Ref r) const { return hot_[size_t(r)].end; }

  // The chain from `last` back to the op that waited for nothing. nullopt
  // where the walk over the whole run could have turned elsewhere: it skips
  // ops already on the path, so a parent already on it, or a partner of an op
  // on it already, would change its choice (only ties of zero-length spans do).
  // transfers, when given: each link's PathTransfer, in the chain's order.
  std::optional<std::vector<schedule::PathLink>> chain(Ref last,
                                                       std::vector<schedule::PathTransfer>* transfers = nullptr) const;

  int64_t live() const { return int64_t(hot_.size() - free_.size()); }

 private:
  // What every reference count and every wait compares (16 bytes), apart from
  // what only the final chain reads: the counting walks hundreds of thousands
  // of live nodes in no order, so the fewer cache lines it touches the better.
  struct Hot {
    double end = 0;  // link.end
    Ref parent = -1;
    int32_t refs = 0;
  };
  struct Cold {
    schedule::PathLink link;
    schedule::PathTransfer transfer;
    int64_t call = kNoCall;
  };
  std::vector<Hot> hot_;    // per node
  std::vector<Cold> cold_;  // per node
  std::vector<Ref> free_;
};

}  // namespace rm::engine
