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

std::vector<schedule::PathLink> critical_chain(const schedule::Schedule& s, const EdgeGraph& g, const OpSpans& t) {
  std::vector<schedule::PathLink> chain;
  // The path ends at the op that ends last (the lowest id on ties).
  OpId cur = -1;
  double last_end = 0;
  for (size_t i = 0; i < s.ops.size(); ++i)
    if (t.has_op(i) && (cur < 0 || t.end[i] > last_end)) cur = OpId(i), last_end = t.end[i];
  std::vector<char> on_path(cur < 0 ? 0 : s.ops.size(), 0);
  while (cur >= 0) {
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
    const Op& o = s.ops[size_t(cur)];
    schedule::PathLink& link = chain.emplace_back();
    link.op = cur, link.start = t.start[size_t(cur)], link.end = t.end[size_t(cur)];
    link.kind = o.kind, link.phase = o.phase;
    on_path[size_t(cur)] = 1;
    if (via >= 0 && via != cur) {
      const Op& v = s.ops[size_t(via)];
      link.via = via, link.via_kind = v.kind, link.via_phase = v.phase;
      on_path[size_t(via)] = 1;
    }
    cur = best;
  }
  return chain;
}

CriticalPath critical_path(const std::vector<schedule::PathLink>& chain) {
  CriticalPath cp;
  if (chain.empty()) return cp;
  std::map<std::pair<OpKind, Phase>, CriticalPathShare> shares;
  auto visit = [&](OpId op, OpKind kind, Phase phase, double seconds) {
    cp.ops.push_back(op);
    auto& sh = shares[{kind, phase}];
    sh.kind = kind;
    sh.phase = phase;
    sh.seconds += seconds;
    ++sh.ops;
    (schedule::is_compute(kind) ? cp.compute_s : cp.communication_s) += seconds;
  };
  const double t_end = chain.front().end;
  double at = t_end;  // the path covers [at, t_end] so far
  for (size_t i = 0; i < chain.size(); ++i) {
    const schedule::PathLink& l = chain[i];
    const double start = std::min(l.start, at);
    if (i + 1 == chain.size()) {
      visit(l.op, l.kind, l.phase, at - start);
      at = start;
      break;
    }
    const double ready = std::min(chain[i + 1].end, at);
    // A partner's wait can end after the op was posted: the transfer ran from then.
    visit(l.op, l.kind, l.phase, at - std::max(start, ready));
    cp.waiting_s += std::max(0.0, start - ready);
    if (l.via >= 0) visit(l.via, l.via_kind, l.via_phase, 0.0);
    at = ready;
  }
  cp.length_s = t_end - at;
  std::reverse(cp.ops.begin(), cp.ops.end());
  for (auto& [key, sh] : shares) cp.by_kind.push_back(sh);
  std::stable_sort(cp.by_kind.begin(), cp.by_kind.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return cp;
}

CriticalPath critical_path(const schedule::Schedule& s, const EdgeGraph& g, const OpSpans& t) {
  return critical_path(critical_chain(s, g, t));
}

}  // namespace rm::report
