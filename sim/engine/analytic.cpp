#include "sim/engine/analytic.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "sim/engine/exec_plan.hpp"

namespace rm::engine {

namespace {

using schedule::Op;
using schedule::OpId;

struct Event {
  double t;
  uint64_t seq;     // insertion order breaks ties: deterministic
  int64_t id;       // op id, or transfer index
  bool transfer;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Route costs per (src gpu, dst gpu), computed on first use.
struct RouteCost {
  const std::vector<int>* links = nullptr;
  double latency_s = 0;
  double rate_Bps = 0;
  bool known = false;
};

// The analytic backend of the run driver: events ordered by (time, insertion
// sequence); the driver decides what starts, this decides when it ends.
class Sim final : public schedule::RunBackend {
 public:
  Sim(const schedule::Schedule& s, const schedule::RunPlan& run, const topology::Topology& t, const cost::CostModel& m)
      : s_(s), t_(t), m_(m), p_(s, run, m), st_(run), driver_(run, *this) {
    link_free_.assign(t.links().size(), 0.0);
    routes_.resize(size_t(t.gpus()) * size_t(t.gpus()));
  }

  OpTimes run() {
    driver_.start();
    while (!queue_.empty()) {
      Event e = queue_.top();
      queue_.pop();
      now_ = e.t;
      if (e.transfer) xfer_done(e.id);
      else op_done(e.id);
    }
    driver_.check_finished(s_);
    return std::move(st_.times);
  }

 private:
  void push(double t, int64_t id, bool transfer) { queue_.push({t, seq_++, id, transfer}); }

  void post(OpId id) override { st_.times.start[static_cast<size_t>(id)] = now_; }

  void start_compute(OpId id) override { push(now_ + p_.compute_s[static_cast<size_t>(id)], id, false); }

  void start_p2p(OpId id, OpId partner) override {
    const Op& op = s_.ops[static_cast<size_t>(id)];
    const Op& send = op.kind == schedule::OpKind::send ? op : s_.ops[static_cast<size_t>(partner)];
    const double end = transfer_end(p_.gpu_of_rank[static_cast<size_t>(send.rank)],
                                    p_.gpu_of_rank[static_cast<size_t>(send.peer)], double(send.bytes), now_);
    push(end, id, false);
    push(end, partner, false);
  }

  void start_collective(int64_t c) override {
    CallRun& run = st_.calls[static_cast<size_t>(c)];
    begin_call(s_, p_.run, c, run, st_.xfers);
    const auto& members = p_.run.match.calls[static_cast<size_t>(c)];
    for (size_t i = 0; i < members.size(); ++i)
      if (run.member_left[i] == 0) push(now_, members[i], false);
    for (size_t i = 0; i < run.plan.size(); ++i)
      if (st_.xfers[static_cast<size_t>(run.base) + i].deps_left == 0) start_xfer(run, run.base + int64_t(i));
  }

  void start_xfer(const CallRun& run, int64_t x) {
    const auto& pt = run.plan[static_cast<size_t>(st_.xfers[static_cast<size_t>(x)].local)];
    const auto& members = p_.run.match.calls[static_cast<size_t>(st_.xfers[static_cast<size_t>(x)].call)];
    const int src = p_.gpu_of_rank[static_cast<size_t>(s_.ops[static_cast<size_t>(members[static_cast<size_t>(pt.src)])].rank)];
    const int dst = p_.gpu_of_rank[static_cast<size_t>(s_.ops[static_cast<size_t>(members[static_cast<size_t>(pt.dst)])].rank)];
    push(transfer_end(src, dst, pt.bytes, now_), x, true);
  }

  void xfer_done(int64_t x) {
    const Xfer xf = st_.xfers[static_cast<size_t>(x)];  // a copy: op_done may start calls and grow st_.xfers
    CallRun& run = st_.calls[static_cast<size_t>(xf.call)];
    const auto& members = p_.run.match.calls[static_cast<size_t>(xf.call)];
    const auto& pt = run.plan[static_cast<size_t>(xf.local)];
    for (int m : {pt.src, pt.dst})
      if (--run.member_left[static_cast<size_t>(m)] == 0) op_done(members[static_cast<size_t>(m)]);
    for (int32_t i = run.dependents_begin[static_cast<size_t>(xf.local)];
         i < run.dependents_begin[static_cast<size_t>(xf.local) + 1]; ++i) {
      const int64_t d = run.base + run.dependents[static_cast<size_t>(i)];
      if (--st_.xfers[static_cast<size_t>(d)].deps_left == 0) start_xfer(run, d);
    }
  }

  void op_done(OpId id) {
    st_.times.end[static_cast<size_t>(id)] = now_;
    driver_.complete(id);
  }

  // FIFO link reservation (analytic.hpp): wait for every link of the route,
  // hold them for bytes / rate, arrive one latency later.
  double transfer_end(int src, int dst, double bytes, double now) {
    RouteCost& rc = routes_[size_t(src) * size_t(t_.gpus()) + size_t(dst)];
    if (!rc.known) {
      const topology::Route& r = t_.route(src, dst);
      rc.links = &r.links;
      rc.rate_Bps = r.links.empty() ? m_.local_copy_rate_Bps() : std::numeric_limits<double>::infinity();
      for (int l : r.links) {
        const topology::Link& link = t_.links()[static_cast<size_t>(l)];
        rc.rate_Bps = std::min(rc.rate_Bps, m_.link_rate_Bps(link));
        rc.latency_s += m_.link_latency_s(link);
      }
      rc.known = true;
    }
    double begin = now;
    for (int l : *rc.links) begin = std::max(begin, link_free_[static_cast<size_t>(l)]);
    const double hold = bytes / rc.rate_Bps;
    for (int l : *rc.links) link_free_[static_cast<size_t>(l)] = begin + hold;
    return begin + hold + rc.latency_s;
  }

  const schedule::Schedule& s_;
  const topology::Topology& t_;
  const cost::CostModel& m_;
  ExecPlan p_;
  RunState st_;
  schedule::RunDriver driver_;
  double now_ = 0;
  std::vector<double> link_free_;
  std::vector<RouteCost> routes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  uint64_t seq_ = 0;
};

}  // namespace

OpTimes run_analytic(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m) {
  return Sim(s, plan, t, m).run();
}

OpTimes run_analytic(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m) {
  return run_analytic(s, schedule::RunPlan(s), t, m);
}

}  // namespace rm::engine
