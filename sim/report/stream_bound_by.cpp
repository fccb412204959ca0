#include "sim/report/stream_bound_by.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

#include "sim/schedule/call_shape.hpp"

namespace rm::report {

using schedule::Op;
using schedule::OpId;
using schedule::OpKind;

namespace {
std::vector<int> gpus_of(const schedule::Schedule& meta) {
  std::vector<int> g;
  for (const auto& r : meta.ranks) g.push_back(r.gpu);
  return g;
}
}  // namespace

StreamBoundBy::StreamBoundBy(const schedule::Schedule& meta, const topology::Topology& t, const cost::CostModel& m)
    : t_(t),
      m_(m),
      rates_(core::link_rates(t, m)),
      ranks_(int(meta.ranks.size())),
      replicas_(std::max(1, meta.symmetry.replicas)),
      sets_(gpus_of(meta), meta.symmetry.replicas, meta.symmetry.ranks_per_replica),
      phases_(meta.ranks.size()),
      figures_(meta.ranks.size()) {
  for (const auto& r : meta.ranks) {
    auto& kinds = stream_kind_.emplace_back();
    for (const auto& st : r.streams) kinds.push_back(st.kind == schedule::StreamKind::compute ? 1 : 0);
  }
  tr_.replicas = replicas_;
  tr_.links = t.links().size();
  tr_.acc.resize(tr_.links);
  for (auto& u : tr_.uses) u.assign(tr_.links, 0);
}

void StreamBoundBy::add(std::span<const Op> ops, std::span<const schedule::OpDesc> descs, std::span<const double> start,
                        std::span<const double> end, std::span<const schedule::Group> groups, double safe_before) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.rank < 0 || op.rank >= ranks_) continue;  // as match_comms: no rank, no transfer
    const int64_t bytes = schedule::desc_in(descs, op).bytes;
    if (schedule::is_p2p(op.kind)) pair_up(op, bytes, start[i], end[i]);
    else if (schedule::is_collective(op.kind)) join_call(op, bytes, start[i], end[i], groups);
    // Per rank and phase: the op's interval on a stream its rank declares.
    const auto& kinds = stream_kind_[size_t(op.rank)];
    if (op.stream < 0 || size_t(op.stream) >= kinds.size()) continue;
    const auto p = uint8_t(op.phase);
    seen_[p] = true;
    auto& rp = phases_[size_t(op.rank)];
    (kinds[size_t(op.stream)] == 1 ? rp.compute : rp.comm).push_back({{start[i], end[i]}, p});
    ++held_;
  }
  count_until(safe_before);
  if (held_ >= sweep_at_) {
    sweep(safe_before);
    sweep_at_ = std::max<int64_t>(1 << 20, 2 * held_);
  }
}

// ---------------------------------------------------------------- transfers

void StreamBoundBy::pair_up(const Op& op, int64_t bytes, double start, double end) {
  const bool send = op.kind == OpKind::send;
  const Half me{op.id, op.rank, start, end, double(bytes), op.phase, op.step >= 0};
  const auto other = unmatched_.add(send ? std::tuple{op.rank, op.peer, op.tag} : std::tuple{op.peer, op.rank, op.tag},
                                    !send, me);
  if (!other) return;  // waits for its partner
  const Half& s = send ? me : *other;
  const Half& r = send ? *other : me;
  if (s.bytes <= 0) return;  // bound_by counts no transfer without bytes
  const double t0 = std::max(s.start, r.start);
  const int32_t routes = route_set(s.rank, r.rank, 0);
  pending_.push({t0, std::max(t0, std::min(s.end, r.end)), s.bytes, routes, -1, s.phase, s.ring, {0, s.id, 0}});
}

void StreamBoundBy::join_call(const Op& op, int64_t bytes, double start, double end,
                              std::span<const schedule::Group> groups) {
  if (op.group < 0 || size_t(op.group) >= groups.size()) return;
  const schedule::Group& g = groups[size_t(op.group)];
  const auto pos = std::find(g.ranks.begin(), g.ranks.end(), op.rank);
  if (pos == g.ranks.end()) return;
  const size_t n = g.ranks.size(), m = size_t(pos - g.ranks.begin());
  OpenCalls& oc = open_calls_[{op.group, op.tag}];
  if (oc.next_k.empty()) oc.next_k.assign(n, 0);
  const int64_t k = oc.next_k[m]++;  // the k-th op of each member forms call k
  while (k - oc.k_lo >= int64_t(oc.calls.size())) oc.calls.emplace_back().members.assign(n, Member{});
  OpenCall& call = oc.calls[size_t(k - oc.k_lo)];
  call.members[m] = {op.id, start, end};
  if (m == 0) call.first = op, call.bytes = bytes;
  ++call.filled;
  while (!oc.calls.empty() && oc.calls.front().filled == n) {
    form_call(oc.calls.front(), g, op.group, op.tag, oc.k_lo);
    oc.calls.pop_front(), ++oc.k_lo;
  }
}

template <class F>
void StreamBoundBy::call_transfers(const CallRecord& c, F&& f) {
  const std::vector<int>& ranks = group_ranks_[size_t(c.group)];
  const int n = int(ranks.size());
  const std::vector<core::CallPair>& pairs = pairs_.of(c.key);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const core::CallPair& p = pairs[i];
    if (p.bytes <= 0) continue;  // bound_by counts no transfer without bytes
    const double t1 = std::max(c.t0, std::min(c.ends[size_t(p.src)], c.ends[size_t(p.dst % n)]));
    f(i, p, route_set(ranks[size_t(p.src)], ranks[size_t(p.dst % n)], p.dst / n), t1);
  }
}

void StreamBoundBy::form_call(const OpenCall& call, const schedule::Group& g, int64_t group, int64_t tag, int64_t k) {
  const int n = int(call.members.size());
  double t0 = call.members.front().start;  // the call runs once its last member is posted
  for (const Member& x : call.members) t0 = std::max(t0, x.start);
  CallRecord rec;
  rec.t0 = t0;
  rec.key = schedule::call_shape_key(call.first, call.bytes, g, replicas_, n);
  rec.group = int(group);
  for (const Member& x : call.members) rec.ends.push_back(x.end);
  if (group_ranks_.size() <= size_t(group)) group_ranks_.resize(size_t(group) + 1);
  if (group_ranks_[size_t(group)].empty()) group_ranks_[size_t(group)] = g.ranks;
  pending_.push({t0, 0, 0, -1, int32_t(calls_.size()), call.first.phase, call.first.step >= 0, {1 + group, tag, k}});
  for (const Member& x : call.members) call_of_[x.id] = int32_t(calls_.size());
  calls_.push_back(std::move(rec));
}

// A transfer's routes in every replica, numbered as bound_by numbers them.
int32_t StreamBoundBy::route_set(int src_rank, int dst_rank, int dst_k) {
  const auto [set, fresh] = sets_.find(src_rank, dst_rank, dst_k);
  if (fresh)
    for (int k = 0; k < replicas_; ++k) {
      const auto [a, b] = sets_.gpus(src_rank, dst_rank, dst_k, k);
      // Computed, not kept by the Topology: the engine never asks for the translates' pairs.
      const topology::Route r = t_.compute_route(a, b);
      set_links_.insert(set_links_.end(), r.links.begin(), r.links.end());
      route_begin_.push_back(set_links_.size());
      route_cap_.push_back(r.links.empty() ? kEmpty : uint8_t((r.inter_node ? 4 : 0) + core::slowest_kind(r.links, rates_)));
    }
  return set;
}

void StreamBoundBy::count_until(double below) {
  while (!pending_.empty() && pending_.top().t0 < below) {
    count(pending_.top());
    pending_.pop();
  }
}

void StreamBoundBy::count(const Pending& f) {
  if (f.call < 0) return count(f.routes, f.t0, f.t1, f.bytes, f.phase, f.ring);
  call_transfers(calls_[size_t(f.call)], [&](size_t, const core::CallPair& p, int32_t routes, double t1) {
    count(routes, f.t0, t1, p.bytes, f.phase, f.ring);
  });
}

// One transfer into every link of its routes, as core::link_traffic counts it.
void StreamBoundBy::count(int32_t routes, double t0, double t1, double bytes, schedule::Phase phase, bool ring) {
  const size_t R = size_t(replicas_), set = size_t(routes);
  if (set_used_.size() <= set) set_used_.resize(set + 1, 0);
  set_used_[set] = 1;
  // Each class and link in the order link_traffic visits them (replica, then
  // route position): the sums run alike. The set's routes are contiguous.
  for (size_t k = 0; k < R; ++k) {
    const uint8_t cap = route_cap_[set * R + k];
    if (cap != kEmpty) tr_.class_bytes[cap / 4] += bytes, capped_[cap / 4][cap % 4] += bytes;
  }
  const auto p = size_t(phase);
  const int32_t* first = set_links_.data() + route_begin_[set * R];
  const int32_t* last = set_links_.data() + route_begin_[set * R + R];
  for (const int32_t* l = first; l != last; ++l) {
    const int32_t id = *l;
    core::LinkAcc& a = tr_.acc[size_t(id)];
    a.bytes += bytes;
    a.phase_bytes[p] += bytes;
    a.busy.add(t0, t1);
    a.phase_busy[p].add(t0, t1);
    if (ring) a.ring_bytes += bytes, a.ring.add(t0, t1);
  }
}

// ---------------------------------------------------------------- per phase

// Feeds each rank's intervals that start before `below` (all there will ever be
// there) to its unions, in sorted order, as phase_bounds merges them whole.
void StreamBoundBy::sweep(double below) {
  held_ = 0;
  auto cut = [&](std::vector<std::pair<core::Interval, uint8_t>>& v) {
    std::sort(v.begin(), v.end());
    return std::lower_bound(v.begin(), v.end(), std::pair{core::Interval{below, -1e300}, uint8_t(0)});
  };
  for (size_t r = 0; r < phases_.size(); ++r) {
    RankPhases& rp = phases_[r];
    // Compute first: a communication union closed below is then measured against a final compute union.
    const auto c_end = cut(rp.compute);
    for (auto it = rp.compute.begin(); it != c_end; ++it) {
      const auto& [x, p] = *it;
      rp.phase_compute[p].add(x);
      if (!rp.compute_union.empty() && x.first <= rp.compute_union.back().second)
        rp.compute_union.back().second = std::max(rp.compute_union.back().second, x.second);
      else
        rp.compute_union.push_back(x);
    }
    rp.compute.erase(rp.compute.begin(), c_end);
    const auto m_end = cut(rp.comm);
    for (auto it = rp.comm.begin(); it != m_end; ++it) {
      const auto& [x, p] = *it;
      auto& c = rp.phase_comm[p];
      if (c.open && x.first <= c.hi) {
        c.hi = std::max(c.hi, x.second);
        continue;
      }
      if (c.open) close_comm(r, p);
      c.lo = x.first, c.hi = x.second, c.open = true;
    }
    rp.comm.erase(rp.comm.begin(), m_end);
    held_ += int64_t(rp.compute.size() + rp.comm.size());
    // Drop what no communication still to come can overlap (never the last: it may grow).
    double keep_from = below;
    for (const auto& c : rp.phase_comm)
      if (c.open) keep_from = std::min(keep_from, c.lo);
    while (rp.compute_union.size() > 1 && rp.compute_union.front().second <= keep_from)
      rp.compute_union.pop_front(), ++rp.union_base;
  }
}

// A closed union [lo, hi] of one phase's communication: what of it no compute covers (minus_length's step).
void StreamBoundBy::close_comm(size_t rank, size_t phase) {
  RankPhases& rp = phases_[rank];
  auto& c = rp.phase_comm[phase];
  const double a = c.lo, b = c.hi;
  const auto& y = rp.compute_union;
  const int64_t end = rp.union_base + int64_t(y.size());
  auto at = [&](int64_t k) -> const core::Interval& { return y[size_t(k - rp.union_base)]; };
  int64_t& j = c.j;
  j = std::max(j, rp.union_base);
  while (j < end && at(j).second <= a) ++j;
  double covered = 0;
  for (int64_t k = j; k < end && at(k).first < b; ++k) covered += std::min(b, at(k).second) - std::max(a, at(k).first);
  figures_.exposed[rank][phase] += (b - a) - covered;
  c.open = false;
}

// ---------------------------------------------------------------- the end

BoundBy StreamBoundBy::finish(const CriticalPath& cp, std::span<const schedule::PathLink> chain,
                              std::span<const schedule::PathTransfer> transfers, double step, double step_imbalance) {
  count_until(std::numeric_limits<double>::infinity());
  sweep(std::numeric_limits<double>::infinity());
  for (size_t r = 0; r < phases_.size(); ++r)
    for (size_t p = 0; p < schedule::kPhaseCount; ++p) {
      if (phases_[r].phase_comm[p].open) close_comm(r, p);
      figures_.compute[r][p] = phases_[r].phase_compute[p].length_by_pieces();
    }
  figures_.seen = seen_;
  tr_.phases = core::phase_bounds(figures_, cp);
  tr_.capped = capped_;
  const size_t R = size_t(replicas_);
  for (size_t set = 0; set < set_used_.size(); ++set) {
    if (!set_used_[set]) continue;
    for (size_t k = 0; k < R; ++k) {
      const size_t route = set * R + k;
      if (route_cap_[route] == kEmpty) continue;
      for (uint64_t i = route_begin_[route]; i < route_begin_[route + 1]; ++i)
        tr_.uses[route_cap_[route] / 4][size_t(set_links_[i])] = 1;
    }
  }
  // Each link's critical time: the union of the critical path's transfers on it
  // (a p2p op's pair; every pair of a call one of whose ops is on it), in start
  // order. A call's transfers all start with it: one entry per call, its
  // transfers made again as it is reached (an all-to-all has n^2 of them).
  struct Critical {
    double t0, t1;
    int64_t what;  // >= 0: a p2p transfer's route (set * R + k); < 0: call -(what + 1)
  };
  std::vector<Critical> critical;
  std::vector<char> call_seen(calls_.size(), 0);
  for (size_t i = 0; i < chain.size(); ++i) {
    const schedule::PathLink& l = chain[i];
    if (schedule::is_p2p(l.kind) && i < transfers.size() && transfers[i].src_rank >= 0) {
      const schedule::PathTransfer& x = transfers[i];
      const auto route = int64_t(route_set(x.src_rank, x.dst_rank, 0)) * int64_t(R);
      if (route_cap_[size_t(route)] != kEmpty) critical.push_back({x.start, std::max(x.start, l.end), route});
    } else if (schedule::is_collective(l.kind)) {
      const auto it = call_of_.find(l.op);
      if (it == call_of_.end() || call_seen[size_t(it->second)]) continue;
      call_seen[size_t(it->second)] = 1;
      critical.push_back({calls_[size_t(it->second)].t0, 0, -(int64_t(it->second) + 1)});
    }
  }
  // Equal starts may come in any order: a union of intervals fed by start is the same.
  std::sort(critical.begin(), critical.end(), [](const Critical& x, const Critical& y) { return x.t0 < y.t0; });
  auto add = [&](size_t route, double t0, double t1) {
    if (route_cap_[route] == kEmpty) return;
    for (uint64_t i = route_begin_[route]; i < route_begin_[route + 1]; ++i)
      tr_.acc[size_t(set_links_[i])].critical.add(t0, t1);
  };
  for (const Critical& c : critical) {
    if (c.what >= 0) {
      add(size_t(c.what), c.t0, c.t1);
      continue;
    }
    const CallRecord& call = calls_[size_t(-(c.what + 1))];
    call_transfers(call, [&](size_t, const core::CallPair&, int32_t routes, double t1) {
      for (size_t k = 0; k < R; ++k)
        if (k == 0 || call.key.spanning()) add(size_t(routes) * R + k, call.t0, t1);
    });
  }
  return core::bound_by(tr_, t_, m_, cp, step, step_imbalance);
}

}  // namespace rm::report
