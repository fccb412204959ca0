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
class Sim final : public schedule::RunBackend, EventCore<Sim> {
 public:
  Sim(const schedule::Schedule& s, const schedule::RunPlan& run, const topology::Topology& t, const cost::CostModel& m,
      ExecPlan p, std::vector<double> capacity)
      : EventCore(t, m, std::move(capacity)), s_(s), p_(std::move(p)), st_(run), driver_(run, *this) {
    if (s.symmetry.replicas > 1) sym_ = std::make_unique<ReplicaRoutes>(t, m, s.symmetry);
    p2p_of_.assign(s.ops.size(), -1);
    for (size_t id = 0; id < s.ops.size(); ++id) {
      // Only matched pairs transfer; the plan's arrays say which ops to read.
      if (run.role[id] != schedule::RunPlan::Role::p2p || run.match.partner[id] < 0) continue;
      const Op& op = s.ops[id];
      if (op.kind != schedule::OpKind::send) continue;
      const int32_t x = static_cast<int32_t>(p2p_.size());
      p2p_.push_back({route(p_.gpu_of_rank[static_cast<size_t>(op.rank)], p_.gpu_of_rank[static_cast<size_t>(op.peer)]),
                      double(s.desc(op).bytes)});
      p2p_of_[id] = x;
      p2p_of_[static_cast<size_t>(run.match.partner[id])] = x;
    }
  }

  OpTimes run() {
    driver_.start();
    while (pending()) step(next());
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
  friend EventCore<Sim>;

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

  const schedule::Schedule& s_;
  ExecPlan p_;
  RunState st_;
  schedule::RunDriver driver_;
  std::map<std::pair<int, const CallShape*>, std::vector<int32_t>> call_routes_;  // (group, shape): per transfer, its route (-1: not yet)
  std::vector<std::vector<int32_t>*> route_ids_of_call_;  // per call in flight: its call_routes_ entry
  std::vector<P2PXfer> p2p_;    // per send op, in id order
  std::vector<int32_t> p2p_of_;  // per op: its pair's p2p_ index; -1 if none
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
