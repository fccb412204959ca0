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

EdgeGraph::EdgeGraph(const std::vector<traces::Edge>& edges, size_t n) : begin_(n + 1, 0), partner_(n, -1), hub_(n, -1) {
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

std::vector<OpId> EdgeGraph::partners(OpId op) const {
  std::vector<OpId> out;
  if (partner_[size_t(op)] >= 0) out.push_back(partner_[size_t(op)]);
  if (const OpId hub = hub_[size_t(op)]; hub >= 0) {
    if (hub != op) out.push_back(hub);
    for (OpId m : members_.at(hub))
      if (m != op) out.push_back(m);
  }
  return out;
}

CriticalPath critical_path(const schedule::Schedule& s, const traces::Timeline& tl) {
  return critical_path(s, EdgeGraph(tl.edges, s.ops.size()), spans_of(s, tl));
}

CriticalPath critical_path(const schedule::Schedule& s, const EdgeGraph& g, const OpSpans& t) {
  CriticalPath cp;
  // The path ends at the op that ends last (the lowest id on ties).
  OpId cur = -1;
  double last_end = 0;
  for (size_t i = 0; i < s.ops.size(); ++i)
    if (t.has_op(i) && (cur < 0 || t.end[i] > last_end)) cur = OpId(i), last_end = t.end[i];
  if (cur < 0) return cp;

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

  const double t_end = t.end[size_t(cur)];
  double at = t_end;  // the path covers [at, t_end] so far
  for (;;) {
    // The latest-ending wait of cur or of a partner (cur's own first on ties).
    OpId best = -1, via = -1;
    double best_end = 0;
    auto consider = [&](OpId through) {
      g.waits(through, [&](OpId p) {
        if (!t.has_op(size_t(p)) || on_path[size_t(p)] || (best >= 0 && t.end[size_t(p)] <= best_end)) return;
        best = p;
        via = through;
        best_end = t.end[size_t(p)];
      });
    };
    consider(cur);
    for (OpId m : g.partners(cur))
      if (!on_path[size_t(m)]) consider(m);

    const double start = std::min(t.start[size_t(cur)], at);
    if (best < 0) {
      visit(cur, at - start);
      at = start;
      break;
    }
    const double ready = std::min(best_end, at);
    // A partner's wait can end after cur was posted: the transfer ran from then.
    visit(cur, at - std::max(start, ready));
    cp.waiting_s += std::max(0.0, start - ready);
    if (via != cur) visit(via, 0.0);
    at = ready;
    cur = best;
  }
  cp.length_s = t_end - at;
  std::reverse(cp.ops.begin(), cp.ops.end());
  for (auto& [key, sh] : shares) cp.by_kind.push_back(sh);
  std::stable_sort(cp.by_kind.begin(), cp.by_kind.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return cp;
}

}  // namespace rm::report
