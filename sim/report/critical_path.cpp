#include "sim/report/critical_path.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

namespace rm::report {

using schedule::Op;
using schedule::OpId;
using schedule::OpKind;
using schedule::Phase;
using traces::EdgeKind;
using traces::Event;

namespace {

// The Timeline's edges indexed by op: what each op waited for (dependency
// edges, then stream edges, each in the Timeline's order) and its partners.
class EdgeGraph {
 public:
  EdgeGraph(const std::vector<traces::Edge>& edges, size_t n) : begin_(n + 1, 0), partner_(n, -1), hub_(n, -1) {
    auto ok = [n](OpId x) { return x >= 0 && size_t(x) < n; };
    auto waits = [](EdgeKind k) { return k == EdgeKind::dependency || k == EdgeKind::stream; };
    // Two passes: count each op's dependency and stream edges, then place
    // them (an op's dependency edges first, each kind in the edges' order).
    std::vector<uint32_t> deps(n, 0);
    for (const auto& e : edges)
      if (ok(e.from) && ok(e.to) && waits(e.kind)) {
        ++begin_[size_t(e.to) + 1];
        if (e.kind == EdgeKind::dependency) ++deps[size_t(e.to)];
      }
    for (size_t i = 0; i < n; ++i) begin_[i + 1] += begin_[i];
    waits_.resize(begin_[n]);
    std::vector<size_t> dep_fill(begin_.begin(), begin_.end() - 1), stream_fill(n);
    for (size_t i = 0; i < n; ++i) stream_fill[i] = begin_[i] + deps[i];
    for (const auto& e : edges) {
      if (!ok(e.from) || !ok(e.to)) continue;
      if (e.kind == EdgeKind::dependency) waits_[dep_fill[size_t(e.to)]++] = e.from;
      if (e.kind == EdgeKind::stream) waits_[stream_fill[size_t(e.to)]++] = e.from;
      if (e.kind == EdgeKind::p2p) partner_[size_t(e.from)] = e.to, partner_[size_t(e.to)] = e.from;
      if (e.kind == EdgeKind::collective) {
        hub_[size_t(e.to)] = e.from;
        hub_[size_t(e.from)] = e.from;
        members_[e.from].push_back(e.to);
      }
    }
  }

  // What op's start waited for, in order.
  template <class F>
  void waits(OpId op, F&& f) const {
    for (size_t i = begin_[size_t(op)]; i < begin_[size_t(op) + 1]; ++i) f(waits_[i]);
  }

  // The ops whose posting a transfer of `op` also waited for: its p2p partner,
  // or the other members of its collective call in member order.
  std::vector<OpId> partners(OpId op) const {
    std::vector<OpId> out;
    if (partner_[size_t(op)] >= 0) out.push_back(partner_[size_t(op)]);
    if (const OpId hub = hub_[size_t(op)]; hub >= 0) {
      if (hub != op) out.push_back(hub);
      for (OpId m : members_.at(hub))
        if (m != op) out.push_back(m);
    }
    return out;
  }

 private:
  std::vector<size_t> begin_;
  std::vector<OpId> waits_, partner_, hub_;
  std::map<OpId, std::vector<OpId>> members_;  // per call's first member: the others
};

}  // namespace

CriticalPath critical_path(const schedule::Schedule& s, const traces::Timeline& tl) {
  CriticalPath cp;
  std::vector<const Event*> ev(s.ops.size(), nullptr);
  for (const Event& x : tl.events)
    if (x.op >= 0 && size_t(x.op) < ev.size() && !ev[size_t(x.op)]) ev[size_t(x.op)] = &x;
  // The path ends at the op that ends last (the lowest id on ties), found in
  // one pass over the events in their order (not the ops': an op's event lies
  // anywhere among them).
  OpId cur = -1;
  double last_end = 0;
  for (const Event& x : tl.events) {
    if (x.op < 0 || size_t(x.op) >= ev.size() || ev[size_t(x.op)] != &x) continue;
    if (cur < 0 || x.end_s > last_end || (x.end_s == last_end && x.op < cur)) cur = x.op, last_end = x.end_s;
  }
  if (cur < 0) return cp;

  const EdgeGraph g(tl.edges, s.ops.size());
  std::vector<char> on_path(s.ops.size(), 0);
  std::map<std::pair<OpKind, Phase>, CriticalPathShare> shares;
  auto visit = [&](OpId op, double seconds) {
    on_path[size_t(op)] = 1;
    cp.ops.push_back(op);
    const Op& o = s.ops[size_t(op)];
    auto& sh = shares[{o.kind, o.phase}];
    sh.kind = o.kind;
    sh.phase = o.phase;
    sh.seconds += seconds;
    ++sh.ops;
    (schedule::is_compute(o.kind) ? cp.compute_s : cp.communication_s) += seconds;
  };

  const double t_end = ev[size_t(cur)]->end_s;
  double t = t_end;  // the path covers [t, t_end] so far
  for (;;) {
    // The latest-ending wait of cur or of a partner (cur's own first on ties).
    OpId best = -1, via = -1;
    double best_end = 0;
    auto consider = [&](OpId through) {
      g.waits(through, [&](OpId p) {
        const Event* e = ev[size_t(p)];
        if (!e || on_path[size_t(p)] || (best >= 0 && e->end_s <= best_end)) return;
        best = p;
        via = through;
        best_end = e->end_s;
      });
    };
    consider(cur);
    for (OpId m : g.partners(cur))
      if (!on_path[size_t(m)]) consider(m);

    const double start = std::min(ev[size_t(cur)]->start_s, t);
    if (best < 0) {
      visit(cur, t - start);
      t = start;
      break;
    }
    const double ready = std::min(best_end, t);
    // A partner's wait can end after cur was posted: the transfer ran from then.
    visit(cur, t - std::max(start, ready));
    cp.waiting_s += std::max(0.0, start - ready);
    if (via != cur) visit(via, 0.0);
    t = ready;
    cur = best;
  }
  cp.length_s = t_end - t;
  std::reverse(cp.ops.begin(), cp.ops.end());
  for (auto& [key, sh] : shares) cp.by_kind.push_back(sh);
  std::stable_sort(cp.by_kind.begin(), cp.by_kind.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return cp;
}

}  // namespace rm::report
