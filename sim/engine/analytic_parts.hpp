// The analytic engine's parts that the whole-Schedule run (analytic.cpp) and
// the streamed run (stream_run.cpp) share: the event record and its order, the
// heap of flow ends, and the routes as the engine runs them. Internal to
// sim/engine; one definition so that both runs take every decision alike (a
// streamed run's op times equal the whole run's bit for bit).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/topology/topology.hpp"

namespace rm::engine::analytic_parts {

// What an event does when its time comes.
enum class Ev : uint8_t {
  op_done,     // a = op
  p2p_done,    // a = the op that started the pair, b = its partner
  xfer_done,   // a = collective transfer (xfer_id)
  activate,    // a = pending transfer whose route latency has passed: its bytes start to flow
};

struct Event {
  double t;
  uint64_t seq;  // insertion order breaks ties: deterministic
  int64_t a, b;
  Ev kind;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// When each flow in flight ends at its current rate: a min-heap of flow ids
// on (t, seq), updated in place when a rate changes. (A plain event queue
// would keep every superseded end as a stale entry: under contention it grows
// with each rate change, and every push and pop pays for its size.) Keys take
// their seq from the same counter as the events, so the order in which events
// and flow ends are handled is exactly that of one queue of both.
class FlowEnds {
 public:
  struct Key {
    double t;
    uint64_t seq;
    bool operator<(const Key& o) const { return t != o.t ? t < o.t : seq < o.seq; }
  };
  bool empty() const { return heap_.empty(); }
  int32_t top() const { return heap_.front(); }
  const Key& key(int32_t f) const { return key_[static_cast<size_t>(f)]; }
  void set(int32_t f, Key k) {
    const auto i = static_cast<size_t>(f);
    if (i >= key_.size()) key_.resize(i + 1), pos_.resize(i + 1, -1);
    key_[i] = k;
    if (pos_[i] < 0) {
      pos_[i] = static_cast<int32_t>(heap_.size());
      heap_.push_back(f);
    }
    rise(static_cast<size_t>(pos_[i]), f);
    down(static_cast<size_t>(pos_[i]));
  }
  // Bottom-up (Floyd): the hole left by the top sinks to a leaf along the
  // smaller children, one comparison a level instead of two, and the last entry
  // rises from there (rarely far: it came from the bottom). The keys are
  // distinct, so the order of pops is that of any min-heap.
  void pop() {
    pos_[static_cast<size_t>(heap_.front())] = -1;
    const int32_t last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t hole = 0;
    for (size_t c = 1; c < n; c = 2 * hole + 1) {
      if (c + 1 < n && less(c + 1, c)) ++c;
      heap_[hole] = heap_[c];
      pos_[static_cast<size_t>(heap_[hole])] = static_cast<int32_t>(hole);
      hole = c;
    }
    rise(hole, last);
  }

 private:
  bool less(size_t a, size_t b) const { return key(heap_[a]) < key(heap_[b]); }
  void swap_at(size_t a, size_t b) {
    std::swap(heap_[a], heap_[b]);
    pos_[static_cast<size_t>(heap_[a])] = static_cast<int32_t>(a);
    pos_[static_cast<size_t>(heap_[b])] = static_cast<int32_t>(b);
  }
  // Flow f goes to `hole` or above it, the entries it passes moving down a level.
  void rise(size_t hole, int32_t f) {
    const Key& k = key(f);
    while (hole > 0 && k < key(heap_[(hole - 1) / 2])) {
      const size_t parent = (hole - 1) / 2;
      heap_[hole] = heap_[parent];
      pos_[static_cast<size_t>(heap_[hole])] = static_cast<int32_t>(hole);
      hole = parent;
    }
    heap_[hole] = f;
    pos_[static_cast<size_t>(f)] = static_cast<int32_t>(hole);
  }
  void down(size_t i) {
    for (;;) {
      size_t m = i;
      const size_t l = 2 * i + 1, r = l + 1;
      if (l < heap_.size() && less(l, m)) m = l;
      if (r < heap_.size() && less(r, m)) m = r;
      if (m == i) return;
      swap_at(i, m);
      i = m;
    }
  }
  std::vector<int32_t> heap_;
  std::vector<int32_t> pos_;  // per flow: its index in heap_; -1 when not queued
  std::vector<Key> key_;      // per flow
};

// A route's cost, for each (src gpu, dst gpu) pair the Schedule uses: its
// links (a range of Sim::route_links_) and summed latency. Topology::route is
// called once per used pair; nothing is kept per pair not used.
struct RouteCost {
  int32_t link_begin = 0, link_count = 0;
  double latency_s = 0;
};

// A send/recv pair's transfer, prepared before the run so that the event loop
// reads no Op (a Schedule's ops are large and far apart in memory).
struct P2PXfer {
  int32_t route;
  double bytes;
};

// Who a transfer belongs to: a p2p pair (a = started op, b = partner) or a
// collective's planned transfer (a = its xfer_id, b = -1).
struct Owner {
  int64_t a, b;
};

// A transfer in its route latency, before its bytes flow.
struct Pending {
  Owner owner{-1, -1};
  double bytes = 0;
  int32_t route = -1;
};

// The route src -> dst as the engine runs it: its links appended to `links`
// (under the data-parallel shortcut, sym: folded onto their orbits, with the
// weights of the translates crossing them appended to `weights`); returns its
// summed latency. Where the shortcut is not exact, `why` says why.
inline double append_route(const topology::Topology& t, const cost::CostModel& m, ReplicaRoutes* sym, int src, int dst,
                    std::vector<int>& links, std::vector<int32_t>& weights, std::string& why) {
  const topology::Route& r = t.route(src, dst);  // a reference or a temporary: read here either way
  double latency = 0;
  for (int l : r.links) latency += m.link_latency_s(t.links()[static_cast<size_t>(l)]);
  if (sym) {
    FoldedRoute f;
    why = sym->fold(src, dst, f);
    links.insert(links.end(), f.links.begin(), f.links.end());
    weights.insert(weights.end(), f.weights.begin(), f.weights.end());
  } else {
    links.insert(links.end(), r.links.begin(), r.links.end());
  }
  return latency;
}

inline std::vector<double> capacities(const topology::Topology& t, const cost::CostModel& m) {
  std::vector<double> c;
  c.reserve(t.links().size());
  for (const auto& l : t.links()) c.push_back(m.link_rate_Bps(l));
  return c;
}

}  // namespace rm::engine::analytic_parts
