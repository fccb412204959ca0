#include "sim/engine/analytic.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <queue>
#include <span>
#include <unordered_map>

#include "sim/engine/analytic_parts.hpp"
#include "sim/engine/exec_plan.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::engine {

namespace {

using schedule::Op;
using schedule::OpId;

using namespace analytic_parts;  // NOLINT: the engine's own parts

// The analytic backend of the run driver: events ordered by (time, insertion
// sequence); the driver decides what starts, this decides when it ends.
class Sim final : public schedule::RunBackend {
 public:
  Sim(const schedule::Schedule& s, const schedule::RunPlan& run, const topology::Topology& t, const cost::CostModel& m,
      ExecPlan p, std::vector<double> capacity)
      : s_(s), t_(t), m_(m), p_(std::move(p)), st_(run), driver_(run, *this), net_(std::move(capacity)) {
    if (s.symmetry.replicas > 1) sym_ = std::make_unique<ReplicaRoutes>(t, m, s.symmetry);
    p2p_of_.assign(s.ops.size(), -1);
    for (size_t id = 0; id < s.ops.size(); ++id) {
      // Only matched pairs transfer; the plan's arrays say which ops to read.
      if (run.role[id] != schedule::RunPlan::Role::p2p || run.match.partner[id] < 0) continue;
      const Op& op = s.ops[id];
      if (op.kind != schedule::OpKind::send) continue;
      const int32_t x = static_cast<int32_t>(p2p_.size());
      p2p_.push_back({route(p_.gpu_of_rank[static_cast<size_t>(op.rank)], p_.gpu_of_rank[static_cast<size_t>(op.peer)]),
                      double(op.bytes)});
      p2p_of_[id] = x;
      p2p_of_[static_cast<size_t>(run.match.partner[id])] = x;
    }
  }

  OpTimes run() {
    driver_.start();
    while (!queue_.empty() || !ends_.empty()) {
      if (!ends_.empty() && (queue_.empty() || ends_.key(ends_.top()) < FlowEnds::Key{queue_.top().t, queue_.top().seq})) {
        const int32_t f = ends_.top();
        now_ = ends_.key(f).t;
        ends_.pop();
        flow_done(f);
        continue;
      }
      const Event e = queue_.top();
      queue_.pop();
      now_ = e.t;
      switch (e.kind) {
        case Ev::op_done: op_done(e.a); break;
        case Ev::p2p_done: op_done(e.a), op_done(e.b); break;
        case Ev::xfer_done: xfer_done(e.a); break;
        case Ev::activate: activate(e.a); break;
      }
    }
    driver_.check_finished(s_);
    return std::move(st_.times);
  }

  // What the run read of the cluster, for a later run to compare with (AnalyticReuse).
  void keep(AnalyticReuse::Kept& k) {
    k.compute_s = std::move(p_.compute_s);
    k.capacity = net_.capacity();
    k.binding = net_.binding();
    k.local_rate = m_.local_copy_rate_Bps();
    k.route_keys = route_keys_;
    k.route_begin.clear();
    for (const RouteCost& rc : routes_) k.route_begin.push_back(rc.link_begin);
    k.route_begin.push_back(static_cast<int32_t>(route_links_.size()));
    k.route_links = route_links_;
    k.route_weights = route_weights_;
    k.route_latency.clear();
    for (const RouteCost& rc : routes_) k.route_latency.push_back(rc.latency_s);
  }

 private:
  void push(double t, Ev kind, int64_t a, int64_t b = -1) {
    queue_.push({t, seq_++, a, b, kind});
  }

  void post(OpId id) override { st_.times.start[static_cast<size_t>(id)] = now_; }

  void start_compute(OpId id) override { push(now_ + p_.compute_s[static_cast<size_t>(id)], Ev::op_done, id); }

  void start_p2p(OpId id, OpId partner) override {
    const P2PXfer& x = p2p_[static_cast<size_t>(p2p_of_[static_cast<size_t>(id)])];
    start_transfer(x.route, x.bytes, {id, partner});
  }

  void start_collective(int64_t c) override {
    CallRun& run = st_.calls[static_cast<size_t>(c)];
    begin_call(s_, p_.run, c, run, st_.shapes);
    const auto& members = p_.run.match.calls[static_cast<size_t>(c)];
    if (route_ids_of_call_.empty()) route_ids_of_call_.assign(st_.calls.size(), nullptr);
    auto& ids = call_routes_[{s_.ops[static_cast<size_t>(members.front())].group, run.shape.get()}];
    if (ids.empty()) ids.assign(run.plan().size(), -1);
    route_ids_of_call_[static_cast<size_t>(c)] = &ids;
    for (size_t i = 0; i < members.size(); ++i)
      if (run.member_left[i] == 0) push(now_, Ev::op_done, members[i]);
    for (size_t i = 0; i < run.plan().size(); ++i)
      if (run.deps_left[i] == 0) start_xfer(run, c, static_cast<int32_t>(i));
  }

  void start_xfer(const CallRun& run, int64_t call, int32_t local) {
    const auto& pt = run.plan()[static_cast<size_t>(local)];
    const auto& members = p_.run.match.calls[static_cast<size_t>(call)];
    // Calls of one group and shape move between the same GPU pairs (members in
    // group order): each transfer's route id is looked up once, not per call.
    int32_t& r = (*route_ids_of_call_[static_cast<size_t>(call)])[static_cast<size_t>(local)];
    if (r < 0) {
      auto gpu = [&](int m) {  // member m of the plan; in another replica for a spanning call (symmetry.hpp)
        const int g = p_.gpu_of_rank[static_cast<size_t>(s_.ops[static_cast<size_t>(members[static_cast<size_t>(run.slot(m))])].rank)];
        return run.fold > 0 ? sym_->translate(g, m / run.fold) : g;
      };
      r = route(gpu(pt.src), gpu(pt.dst));
    }
    start_transfer(r, pt.bytes, {xfer_id(call, local), -1});
  }

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
    if (rc.latency_s > 0) {
      int64_t slot;
      if (free_pending_.empty()) {
        slot = static_cast<int64_t>(pending_.size());
        pending_.emplace_back();
      } else {
        slot = free_pending_.back();
        free_pending_.pop_back();
      }
      pending_[static_cast<size_t>(slot)] = {owner, bytes, route};
      push(now_ + rc.latency_s, Ev::activate, slot);
      return;
    }
    begin_flow(route, bytes, owner);
  }

  // Latency passed: the bytes enter the network.
  void activate(int64_t slot) {
    const Pending p = pending_[static_cast<size_t>(slot)];
    free_pending_.push_back(slot);
    begin_flow(p.route, p.bytes, p.owner);
  }

  void begin_flow(int32_t route, double bytes, Owner owner) {
    const RouteCost& rc = routes_[static_cast<size_t>(route)];
    const auto links = std::span<const int>(route_links_).subspan(size_t(rc.link_begin), size_t(rc.link_count));
    const int32_t f = sym_ ? net_.start(links, std::span<const int32_t>(route_weights_).subspan(size_t(rc.link_begin), size_t(rc.link_count)),
                                        bytes, now_)
                           : net_.start(links, bytes, now_);
    if (static_cast<size_t>(f) >= owners_.size()) owners_.resize(static_cast<size_t>(f) + 1);
    owners_[static_cast<size_t>(f)] = owner;
    reschedule();
  }

  void flow_done(int32_t f) {
    const Owner o = owners_[static_cast<size_t>(f)];
    net_.finish(f, now_);
    reschedule();
    if (o.b >= 0) op_done(o.a), op_done(o.b);
    else xfer_done(o.a);
  }

  // Queue the new end of every flow whose rate the last start/finish changed.
  void reschedule() {
    for (int32_t g : net_.rescheduled()) ends_.set(g, {net_.end_time(g), seq_++});
  }

  void xfer_done(int64_t x) {
    const int64_t call = xfer_call(x);
    const int32_t local = xfer_local(x);
    CallRun& run = st_.calls[static_cast<size_t>(call)];  // st_.calls never grows: op_done leaves it put
    const auto& members = p_.run.match.calls[static_cast<size_t>(call)];
    const auto& pt = run.plan()[static_cast<size_t>(local)];
    for (int m : {run.slot(pt.src), run.slot(pt.dst)})
      if (--run.member_left[static_cast<size_t>(m)] == 0) op_done(members[static_cast<size_t>(m)]);
    run.release_dependents(local, [&](int32_t d) { start_xfer(run, call, d); });
    run.end_xfer();
  }

  void op_done(OpId id) {
    st_.times.end[static_cast<size_t>(id)] = now_;
    driver_.complete(id);
  }

  // The index of (src, dst)'s RouteCost, made on first use.
  int32_t route(int src, int dst) {
    const uint64_t key = uint64_t(uint32_t(src)) << 32 | uint32_t(dst);
    auto [it, fresh] = route_ids_.try_emplace(key, static_cast<int32_t>(routes_.size()));
    if (fresh) {
      RouteCost rc{static_cast<int32_t>(route_links_.size()), 0, 0.0};
      std::string why;
      rc.latency_s = append_route(t_, m_, sym_.get(), src, dst, route_links_, route_weights_, why);
      if (!why.empty()) throw schedule::ScheduleError("the data-parallel shortcut is not exact here: " + why);
      rc.link_count = static_cast<int32_t>(route_links_.size()) - rc.link_begin;
      routes_.push_back(rc);
      route_keys_.push_back(key);
    }
    return it->second;
  }

  const schedule::Schedule& s_;
  const topology::Topology& t_;
  const cost::CostModel& m_;
  ExecPlan p_;
  RunState st_;
  schedule::RunDriver driver_;
  FlowNetwork net_;
  double now_ = 0;
  std::unordered_map<uint64_t, int32_t> route_ids_;  // (src << 32 | dst) -> routes_ index
  std::map<std::pair<int, const CallShape*>, std::vector<int32_t>> call_routes_;  // (group, shape): per transfer, its route (-1: not yet)
  std::vector<std::vector<int32_t>*> route_ids_of_call_;  // per call in flight: its call_routes_ entry
  std::vector<RouteCost> routes_;
  std::vector<uint64_t> route_keys_;  // per routes_ entry: its (src << 32 | dst)
  std::vector<int> route_links_;
  std::vector<int32_t> route_weights_;  // with sym_: per entry of route_links_
  std::unique_ptr<ReplicaRoutes> sym_;  // a replica-symmetric Schedule (symmetry.hpp)
  std::vector<P2PXfer> p2p_;    // per send op, in id order
  std::vector<int32_t> p2p_of_;  // per op: its pair's p2p_ index; -1 if none
  std::vector<Owner> owners_;  // per flow id
  std::vector<Pending> pending_;
  std::vector<int64_t> free_pending_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  FlowEnds ends_;
  uint64_t seq_ = 0;
};

}  // namespace

namespace {

// Whether a run of s with compute seconds p.compute_s on t and m would take
// every decision k's run took (AnalyticReuse).
bool repeats(const AnalyticReuse::Kept& k, const schedule::Schedule& s, const ExecPlan& p,
             const std::vector<double>& capacity, const topology::Topology& t, const cost::CostModel& m) {
  if (p.compute_s != k.compute_s || m.local_copy_rate_Bps() != k.local_rate || capacity.size() != k.capacity.size())
    return false;
  for (size_t l = 0; l < capacity.size(); ++l)
    if (k.binding[l] ? capacity[l] != k.capacity[l] : !(capacity[l] >= k.capacity[l])) return false;
  // The routes it used, in the order it first used them (a fold checks its consistency with the folds before).
  std::unique_ptr<ReplicaRoutes> sym;
  if (s.symmetry.replicas > 1) sym = std::make_unique<ReplicaRoutes>(t, m, s.symmetry);
  std::vector<int> links;
  std::vector<int32_t> weights;
  std::string why;
  for (size_t r = 0; r < k.route_keys.size(); ++r) {
    links.clear(), weights.clear();
    const double latency = append_route(t, m, sym.get(), int(k.route_keys[r] >> 32), int(uint32_t(k.route_keys[r])),
                                        links, weights, why);
    const auto b = size_t(k.route_begin[r]), e = size_t(k.route_begin[r + 1]);
    if (!why.empty() || latency != k.route_latency[r] || links.size() != e - b ||
        !std::equal(links.begin(), links.end(), k.route_links.begin() + std::ptrdiff_t(b)))
      return false;
    if (sym && (weights.size() != e - b || !std::equal(weights.begin(), weights.end(), k.route_weights.begin() + std::ptrdiff_t(b))))
      return false;
  }
  return true;
}

}  // namespace

OpTimes run_analytic(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m, const FixedDurations* fixed_compute_s, AnalyticReuse* reuse) {
  ExecPlan p(s, plan, m, fixed_compute_s);
  std::vector<double> capacity = capacities(t, m);
  if (!reuse) return Sim(s, plan, t, m, std::move(p), std::move(capacity)).run();
  if (reuse->valid_ && repeats(reuse->kept_, s, p, capacity, t, m)) {
    ++reuse->reused_;
    return reuse->times_;
  }
  reuse->valid_ = false;
  Sim sim(s, plan, t, m, std::move(p), std::move(capacity));
  OpTimes times = sim.run();
  sim.keep(reuse->kept_);
  reuse->times_ = times;
  reuse->valid_ = true;
  ++reuse->runs_;
  return times;
}

OpTimes run_analytic(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m) {
  return run_analytic(s, schedule::RunPlan(s), t, m);
}

}  // namespace rm::engine
