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

// A collective call in flight: its transfers live in Sim::st_.xfers from `base`.
class Sim {
 public:
  Sim(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m)
      : s_(s), t_(t), m_(m), p_(make_exec_plan(s, m)), st_(s, p_) {
    link_free_.assign(t.links().size(), 0.0);
    routes_.resize(size_t(t.gpus()) * size_t(t.gpus()));
  }

  OpTimes run() {
    for (size_t k = 0; k < p_.streams.size(); ++k) try_stream(k, 0.0);
    while (!queue_.empty()) {
      Event e = queue_.top();
      queue_.pop();
      if (e.transfer) xfer_done(e.id, e.t);
      else op_done(e.id, e.t);
    }
    check_all_ended(s_, st_.times.end);
    return std::move(st_.times);
  }

 private:
  void push(double t, int64_t id, bool transfer) { queue_.push({t, seq_++, id, transfer}); }

  void try_stream(size_t k, double now) {
    const auto& ops = p_.streams[k];
    if (st_.run_left[k] > 0 || st_.head[k] >= ops.size()) return;
    const size_t len = static_cast<size_t>(p_.run_length[static_cast<size_t>(ops[st_.head[k]])]);
    for (size_t i = st_.head[k]; i < st_.head[k] + len; ++i)
      if (st_.deps_left[static_cast<size_t>(ops[i])] > 0) return;
    st_.run_left[k] = len;
    for (size_t i = st_.head[k]; i < st_.head[k] + len; ++i) start_op(ops[i], now);
  }

  void start_op(OpId id, double now) {
    const auto i = static_cast<size_t>(id);
    st_.times.start[i] = now;
    const Op& op = s_.ops[i];
    if (schedule::is_compute(op.kind)) {
      push(now + p_.compute_s[i], id, false);
    } else if (schedule::is_p2p(op.kind)) {
      const OpId partner = p_.match.partner[i];
      if (st_.times.start[static_cast<size_t>(partner)] < 0) return;  // the partner starts the transfer
      const Op& send = op.kind == schedule::OpKind::send ? op : s_.ops[static_cast<size_t>(partner)];
      const double end = transfer_end(p_.gpu_of_rank[static_cast<size_t>(send.rank)],
                                      p_.gpu_of_rank[static_cast<size_t>(send.peer)], double(send.bytes), now);
      push(end, id, false);
      push(end, partner, false);
    } else {
      const int64_t c = p_.match.call_of[i];
      if (++st_.arrived[static_cast<size_t>(c)] == p_.match.calls[static_cast<size_t>(c)].size()) start_call(c, now);
    }
  }

  void start_call(int64_t c, double now) {
    CallRun& run = st_.calls[static_cast<size_t>(c)];
    begin_call(s_, p_, c, run, st_.xfers);
    const auto& members = p_.match.calls[static_cast<size_t>(c)];
    for (size_t i = 0; i < members.size(); ++i)
      if (run.member_left[i] == 0) push(now, members[i], false);
    for (size_t i = 0; i < run.plan.size(); ++i)
      if (st_.xfers[static_cast<size_t>(run.base) + i].deps_left == 0) start_xfer(run, run.base + int64_t(i), now);
  }

  void start_xfer(const CallRun& run, int64_t x, double now) {
    const auto& pt = run.plan[static_cast<size_t>(st_.xfers[static_cast<size_t>(x)].local)];
    const auto& members = p_.match.calls[static_cast<size_t>(st_.xfers[static_cast<size_t>(x)].call)];
    const int src = p_.gpu_of_rank[static_cast<size_t>(s_.ops[static_cast<size_t>(members[static_cast<size_t>(pt.src)])].rank)];
    const int dst = p_.gpu_of_rank[static_cast<size_t>(s_.ops[static_cast<size_t>(members[static_cast<size_t>(pt.dst)])].rank)];
    push(transfer_end(src, dst, pt.bytes, now), x, true);
  }

  void xfer_done(int64_t x, double now) {
    const Xfer xf = st_.xfers[static_cast<size_t>(x)];  // a copy: op_done may start calls and grow st_.xfers
    CallRun& run = st_.calls[static_cast<size_t>(xf.call)];
    const auto& members = p_.match.calls[static_cast<size_t>(xf.call)];
    const auto& pt = run.plan[static_cast<size_t>(xf.local)];
    for (int m : {pt.src, pt.dst})
      if (--run.member_left[static_cast<size_t>(m)] == 0) op_done(members[static_cast<size_t>(m)], now);
    for (int32_t i = run.dependents_begin[static_cast<size_t>(xf.local)];
         i < run.dependents_begin[static_cast<size_t>(xf.local) + 1]; ++i) {
      const int64_t d = run.base + run.dependents[static_cast<size_t>(i)];
      if (--st_.xfers[static_cast<size_t>(d)].deps_left == 0) start_xfer(run, d, now);
    }
  }

  void op_done(OpId id, double now) {
    const auto i = static_cast<size_t>(id);
    st_.times.end[i] = now;
    for (int64_t j = p_.dependents_begin[i]; j < p_.dependents_begin[i + 1]; ++j) {
      const OpId d = p_.dependents[static_cast<size_t>(j)];
      if (--st_.deps_left[static_cast<size_t>(d)] == 0) try_stream(static_cast<size_t>(p_.stream_of[static_cast<size_t>(d)]), now);
    }
    const auto k = static_cast<size_t>(p_.stream_of[i]);
    if (--st_.run_left[k] == 0) {
      st_.head[k] += static_cast<size_t>(p_.run_length[static_cast<size_t>(p_.streams[k][st_.head[k]])]);
      try_stream(k, now);
    }
  }

  // FIFO link reservation (analytic.hpp): wait for every link of the route,
  // hold them for bytes / rate, arrive one latency later.
  double transfer_end(int src, int dst, double bytes, double now) {
    RouteCost& rc = routes_[size_t(src) * size_t(t_.gpus()) + size_t(dst)];
    if (!rc.known) {
      const Route& r = t_.route(src, dst);
      rc.links = &r.links;
      rc.rate_Bps = r.links.empty() ? m_.local_copy_rate_Bps() : std::numeric_limits<double>::infinity();
      for (int l : r.links) {
        const Link& link = t_.links()[static_cast<size_t>(l)];
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
  const Topology& t_;
  const cost::CostModel& m_;
  ExecPlan p_;
  RunState st_;
  std::vector<double> link_free_;
  std::vector<RouteCost> routes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  uint64_t seq_ = 0;
};

}  // namespace

OpTimes run_analytic(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m) {
  return Sim(s, t, m).run();
}

}  // namespace rm::engine
