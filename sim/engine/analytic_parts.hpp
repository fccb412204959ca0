// The analytic engine's parts that the whole-Schedule run (analytic.cpp) and
// the streamed run (stream_run.cpp) share: the event record and its order, the
// heap of flow ends, and the routes as the engine runs them. Internal to
// sim/engine; one definition so that both runs take every decision alike (a
// streamed run's op times equal the whole run's bit for bit). Event time ties
// break on insertion order (seq): both runs push in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/topology/topology.hpp"

namespace rm::engine::analytic_parts {

// What an event does when its time comes. (A transfer whose route latency
// passes is not an event of this queue: Latencies below keeps those.)
enum class Ev : uint8_t {
  op_done,     // a = op
  p2p_done,    // a = the op that started the pair, b = its partner
  xfer_done,   // a = collective transfer (xfer_id)
};

struct Event {
  double t;
  uint64_t seq;  // insertion order breaks ties: deterministic
  int64_t a, b;
  Ev kind;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// A min-heap of small integer ids on (t, seq), each id's key updated in place.
// It orders the flows in flight by when they end at their current rates (a
// plain event queue would keep every superseded end as a stale entry: under
// contention it grows with each rate change, and every push and pop pays for
// its size), and Latencies' lanes by their heads. Keys take their seq from the
// events' counter, so events, flow ends and lanes are handled exactly in the
// order of one queue of all.
class IndexedTimeHeap {
 public:
  struct Key {
    double t;
    uint64_t seq;
    bool operator<(const Key& o) const { return t != o.t ? t < o.t : seq < o.seq; }
  };
  bool empty() const { return heap_.empty(); }
  int32_t top() const { return heap_.front().id; }
  const Key& top_key() const { return heap_.front().key; }
  void set(int32_t f, Key k) {
    const auto i = static_cast<size_t>(f);
    if (i >= pos_.size()) pos_.resize(i + 1, -1);
    if (pos_[i] < 0) {
      heap_.push_back({k, f});
      rise(heap_.size() - 1, heap_.back());
      return;
    }
    const auto at = static_cast<size_t>(pos_[i]);
    const Entry e{k, f};
    if (k < heap_[at].key)
      rise(at, e);
    else
      sink(at, e);
  }
  // Bottom-up (Floyd): the hole left by the top sinks to a leaf along the
  // smaller children, one comparison a level instead of two, and the last entry
  // rises from there (rarely far: it came from the bottom). The keys are
  // distinct, so the order of pops is that of any min-heap.
  void pop() {
    pos_[static_cast<size_t>(heap_.front().id)] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t hole = 0;
    for (size_t c = 1; c < n; c = 2 * hole + 1) {
      if (c + 1 < n && heap_[c + 1].key < heap_[c].key) ++c;
      place(hole, heap_[c]);
      hole = c;
    }
    rise(hole, last);
  }

 private:
  // The key sits with its id in the heap's array, so a sift compares
  // neighbouring entries instead of looking each key up by id.
  struct Entry {
    Key key;
    int32_t id;
  };
  void place(size_t at, const Entry& e) {
    heap_[at] = e;
    pos_[static_cast<size_t>(e.id)] = static_cast<int32_t>(at);
  }
  // e goes to `hole` or above it, the entries it passes moving down a level.
  void rise(size_t hole, Entry e) {
    while (hole > 0) {
      const size_t parent = (hole - 1) / 2;
      if (!(e.key < heap_[parent].key)) break;
      place(hole, heap_[parent]);
      hole = parent;
    }
    place(hole, e);
  }
  // e goes to `hole` or below it, the smaller child moving up a level each time.
  void sink(size_t hole, Entry e) {
    const size_t n = heap_.size();
    for (size_t c = 2 * hole + 1; c < n; c = 2 * hole + 1) {
      if (c + 1 < n && heap_[c + 1].key < heap_[c].key) ++c;
      if (!(heap_[c].key < e.key)) break;
      place(hole, heap_[c]);
      hole = c;
    }
    place(hole, e);
  }
  std::vector<Entry> heap_;
  std::vector<int32_t> pos_;  // per id: its index in heap_; -1 when not queued
};

// A route's cost, for each (src gpu, dst gpu) pair the Schedule uses: its
// links (a range of Sim::route_links_) and summed latency. Topology::route is
// called once per used pair; nothing is kept per pair not used.
struct RouteCost {
  int32_t link_begin = 0, link_count = 0;
  double latency_s = 0;
  int32_t lane = -1;  // Latencies' lane of latency_s; -1 when 0
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

// A transfer in its route latency: its bytes enter the network at t.
struct Activation {
  double t;
  uint64_t seq;  // from the events' counter: orders it among events and flow ends
  Owner owner;
  double bytes;
  int32_t route;
  IndexedTimeHeap::Key key() const { return {t, seq}; }
};

// The transfers waiting out their route latency, one first-in-first-out lane
// per latency value. A lane's entries are pushed at a clock that never goes
// back, with one latency, so they come due in push order, (t, seq) ascending:
// no heap over the transfers, only a small one over the lanes' heads (a step's
// tens of millions of transfers went through the event heap before, one push
// and one pop each). The order of (t, seq) across lanes is the one queue's.
class Latencies {
 public:
  // The lane of a latency value (> 0), made on first use; a run has a few.
  int32_t lane_of(double latency_s) {
    for (size_t l = 0; l < lanes_.size(); ++l)
      if (lanes_[l].latency_s == latency_s) return static_cast<int32_t>(l);
    lanes_.push_back({latency_s, {}, 0});
    return static_cast<int32_t>(lanes_.size() - 1);
  }
  bool empty() const { return heads_.empty(); }
  // With !empty(): the transfer due first.
  const Activation& top() const { return lanes_[static_cast<size_t>(heads_.top())].front(); }
  void push(int32_t lane, const Activation& a) {
    Lane& l = lanes_[static_cast<size_t>(lane)];
    if (l.head < l.q.size() && a.key() < l.q.back().key())
      throw std::logic_error("analytic engine: a latency lane would leave first-in-first-out order");
    l.q.push_back(a);
    if (l.q.size() - l.head == 1) heads_.set(lane, a.key());
  }
  Activation pop() {
    const int32_t lane = heads_.top();
    Lane& l = lanes_[static_cast<size_t>(lane)];
    const Activation a = l.q[l.head++];
    heads_.pop();
    if (l.head == l.q.size()) {
      l.q.clear(), l.head = 0;
    } else {
      if (l.head >= 4096 && 2 * l.head >= l.q.size())  // a lane that never drains stays bounded
        l.q.erase(l.q.begin(), l.q.begin() + static_cast<std::ptrdiff_t>(l.head)), l.head = 0;
      heads_.set(lane, l.front().key());
    }
    return a;
  }

 private:
  struct Lane {
    double latency_s;
    std::vector<Activation> q;
    size_t head;  // q[head..] are waiting
    const Activation& front() const { return q[head]; }
  };
  std::vector<Lane> lanes_;
  IndexedTimeHeap heads_;  // the lanes, keyed by their heads
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

// The clock, the events, the flow network and the routes of an analytic run:
// what happens to a transfer between its start and its end, and which event
// comes next. Derived decides what starts (analytic.cpp's Sim: the run driver
// over a whole Schedule; stream_run.cpp: over chunks) and provides
// op_done(OpId) and xfer_done(int64_t): an op, or a collective's planned
// transfer (exec_plan.hpp's xfer_id), has ended at now_.
template <class Derived>
class EventCore {
 protected:
  // capacity: per link, capacities(t, m) (a caller that compares runs has it already).
  EventCore(const topology::Topology& t, const cost::CostModel& m, std::vector<double> capacity)
      : t_(t), m_(m), net_(std::move(capacity)) {}

  bool pending() const { return !queue_.empty() || !ends_.empty() || !latencies_.empty(); }
  // Which comes first: an event (queue_.top()), a flow's end (ends_.top()) or
  // a transfer's entry into the network (latencies_.top()).
  enum class Next : uint8_t { event, flow, activation };
  // With pending(): the source of the next to handle, the least (t, seq) of the three.
  Next next() const {
    Next n = Next::event;
    IndexedTimeHeap::Key k{std::numeric_limits<double>::infinity(), ~uint64_t{0}};
    if (!queue_.empty()) k = {queue_.top().t, queue_.top().seq};
    if (!ends_.empty() && ends_.top_key() < k) n = Next::flow, k = ends_.top_key();
    if (!latencies_.empty() && latencies_.top().key() < k) n = Next::activation;
    return n;
  }
  // Handles the next (next() says from where).
  void step(Next next) {
    Derived& d = static_cast<Derived&>(*this);
    if (next == Next::activation) {
      const Activation a = latencies_.pop();
      now_ = a.t;
      begin_flow(a.route, a.bytes, a.owner);
      return;
    }
    if (next == Next::flow) {
      const int32_t f = ends_.top();
      now_ = ends_.top_key().t;
      ends_.pop();
      const Owner o = owners_[static_cast<size_t>(f)];
      net_.finish(f, now_);
      reschedule();
      if (o.b >= 0) d.op_done(o.a), d.op_done(o.b);
      else d.xfer_done(o.a);
      return;
    }
    const Event e = queue_.top();
    queue_.pop();
    now_ = e.t;
    switch (e.kind) {
      case Ev::op_done: d.op_done(e.a); break;
      case Ev::p2p_done: d.op_done(e.a), d.op_done(e.b); break;
      case Ev::xfer_done: d.xfer_done(e.a); break;
    }
  }

  void push(double t, Ev kind, int64_t a, int64_t b = -1) { queue_.push({t, seq_++, a, b, kind}); }

  // A transfer first waits out its route's latency, then its bytes flow at the
  // max-min fair rate of the FlowNetwork (analytic.hpp). Alone on its route it
  // takes latency + bytes / (slowest link rate) = CostModel::transfer_seconds.
  // Between ranks on one GPU it is a local copy, shared with nothing.
  void start_transfer(int32_t route, double bytes, Owner owner) {
    const RouteCost& rc = routes_[static_cast<size_t>(route)];
    if (rc.link_count == 0) {
      push(now_ + bytes / m_.local_copy_rate_Bps(), owner.b >= 0 ? Ev::p2p_done : Ev::xfer_done, owner.a, owner.b);
      return;
    }
    if (rc.lane >= 0) {
      latencies_.push(rc.lane, {now_ + rc.latency_s, seq_++, owner, bytes, route});
      return;
    }
    begin_flow(route, bytes, owner);
  }

  // The index of (src, dst)'s RouteCost, made on first use.
  int32_t route(int src, int dst) {
    const uint64_t key = uint64_t(uint32_t(src)) << 32 | uint32_t(dst);
    // A ring's ranks send to the same few peers over and over: a small
    // direct-mapped memo in front of the map answers most of them.
    RouteMemo& memo = route_memo_[(key * 0x9E3779B97F4A7C15ull) >> (64 - kRouteMemoBits)];
    if (memo.key == key) return memo.id;
    memo = {key, route_id(key, src, dst)};
    return memo.id;
  }
  int32_t route_id(uint64_t key, int src, int dst) {
    auto [it, fresh] = route_ids_.try_emplace(key, static_cast<int32_t>(routes_.size()));
    if (fresh) {
      RouteCost rc{static_cast<int32_t>(route_links_.size()), 0, 0.0};
      std::string why;
      rc.latency_s = append_route(t_, m_, sym_.get(), src, dst, route_links_, route_weights_, why);
      if (!why.empty()) throw ShortcutNotExact(why);
      rc.link_count = static_cast<int32_t>(route_links_.size()) - rc.link_begin;
      if (rc.latency_s > 0) rc.lane = latencies_.lane_of(rc.latency_s);
      routes_.push_back(rc);
      route_keys_.push_back(key);
    }
    return it->second;
  }

  const topology::Topology& t_;
  const cost::CostModel& m_;
  FlowNetwork net_;
  double now_ = 0;
  std::unique_ptr<ReplicaRoutes> sym_;  // a replica-symmetric Schedule (symmetry.hpp); set by Derived
  std::unordered_map<uint64_t, int32_t> route_ids_;  // (src << 32 | dst) -> routes_ index
  // 16K entries (256 KB): at cp = 1,024 the ranks' few peers each make 2-4K
  // pairs, which a 4K-entry memo lost to collisions (the map's lookups were
  // 1.3% of the engine thread on that layer, 0.4% with this size).
  static constexpr int kRouteMemoBits = 14;
  struct RouteMemo {
    uint64_t key = ~uint64_t{0};  // no (src, dst) of GPUs
    int32_t id = -1;
  };
  std::vector<RouteMemo> route_memo_ = std::vector<RouteMemo>(size_t{1} << kRouteMemoBits);
  std::vector<RouteCost> routes_;
  std::vector<uint64_t> route_keys_;  // per routes_ entry: its (src << 32 | dst)
  std::vector<int> route_links_;
  std::vector<int32_t> route_weights_;  // with sym_: per entry of route_links_

 private:
  void begin_flow(int32_t route, double bytes, Owner owner) {
    const RouteCost& rc = routes_[static_cast<size_t>(route)];
    const auto links = std::span<const int>(route_links_).subspan(size_t(rc.link_begin), size_t(rc.link_count));
    const int32_t f =
        sym_ ? net_.start(links,
                          std::span<const int32_t>(route_weights_).subspan(size_t(rc.link_begin), size_t(rc.link_count)),
                          bytes, now_)
             : net_.start(links, bytes, now_);
    if (static_cast<size_t>(f) >= owners_.size()) owners_.resize(static_cast<size_t>(f) + 1);
    owners_[static_cast<size_t>(f)] = owner;
    reschedule();
  }

  // Queue the new end of every flow whose rate the last start/finish changed.
  void reschedule() {
    for (int32_t g : net_.rescheduled()) ends_.set(g, {net_.end_time(g), seq_++});
  }

 protected:
  std::vector<Owner> owners_;  // per flow id
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  IndexedTimeHeap ends_;

 private:
  Latencies latencies_;
  uint64_t seq_ = 0;
};

}  // namespace rm::engine::analytic_parts
