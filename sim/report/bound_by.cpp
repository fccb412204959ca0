#include "sim/report/bound_by.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "sim/report/report_core.hpp"
#include "sim/schedule/call_shape.hpp"
#include "sim/schedule/comm_matching.hpp"

namespace rm::report {

using schedule::Op;
using schedule::OpId;
using schedule::OpKind;
using schedule::Phase;

std::string_view to_string(BoundKind k) {
  switch (k) {
    case BoundKind::compute: return "compute";
    case BoundKind::link: return "link";
    case BoundKind::imbalance: return "imbalance";
    case BoundKind::latency: return "latency";
    case BoundKind::empty: return "empty";
  }
  return "empty";
}

std::string link_kind(const topology::Topology& t, const topology::Link& l) {
  switch (l.cls) {
    case topology::LinkClass::nvlink: return "nvlink";
    case topology::LinkClass::pcie: return "pcie";
    case topology::LinkClass::network: break;
  }
  // Network links that touch a NIC are its port; the others join switches.
  for (int v : {l.from, l.to})
    if (t.vertex_name(v).find("/nic") != std::string::npos) return "nic";
  return "fabric";
}

namespace {

// One transfer as the report sees it: bytes between two GPUs within [t0, t1],
// and under the data-parallel shortcut the same in every other replica.
struct Flow {
  int32_t routes = -1;  // route set: index into LinkTraffic::route_sets / replicas
  double bytes = 0, t0 = 0, t1 = 0;
  Phase phase = Phase::forward;
  bool critical = false;  // replica 0's (a call spanning replicas: every replica's)
  bool spanning = false;  // of a call spanning replicas
  bool ring = false;      // of a ring-step op (step >= 0)
};

// The transfers of a step: one per matched send/recv pair, one per (sender,
// receiver) pair of each collective call's plan (core::flow_plan). A transfer
// runs once both sides are posted (the later start; a call's once all its
// members are) and ends by the earlier end of the ops it touches (each ends
// with its last transfer). Those of ops without times are left out.
// Each distinct GPU pair's route goes into tr.routes once, in first use
// (replica 0's, then its translates').
std::vector<Flow> flows(const schedule::Schedule& s, const topology::Topology& t, const core::FlowPlan& fp,
                        const OpSpans& times, const std::vector<char>& on_path, core::LinkTraffic& tr) {
  // Per call: every member has times, when the last was posted, and whether one is on the critical path.
  std::vector<double> call_t0(fp.calls.size(), 0.0);
  std::vector<char> call_ok(fp.calls.size(), 0), call_critical(fp.calls.size(), 0);
  for (size_t c = 0; c < fp.calls.size(); ++c) {
    const auto& call = fp.calls[c];
    if (call.empty() || std::any_of(call.begin(), call.end(), [&](OpId id) { return id < 0 || !times.has_op(size_t(id)); }))
      continue;
    double t0 = times.start[size_t(call.front())];
    bool critical = false;
    for (OpId id : call) t0 = std::max(t0, times.start[size_t(id)]), critical = critical || on_path[size_t(id)];
    call_ok[c] = 1, call_t0[c] = t0, call_critical[c] = critical;
  }
  std::vector<Flow> out;
  out.reserve(fp.flows.size());
  std::vector<int> gpu_of_rank;
  for (const auto& r : s.ranks) gpu_of_rank.push_back(r.gpu);
  core::RouteSets sets(t, std::move(gpu_of_rank), s.symmetry.replicas, s.symmetry.ranks_per_replica, tr);
  for (const core::FlowTemplate& f : fp.flows) {
    const size_t a = size_t(f.a), b = size_t(f.b);
    double t0 = 0;
    bool critical = false;
    if (f.call < 0) {
      if (!times.has_op(a) || !times.has_op(b)) continue;
      t0 = std::max(times.start[a], times.start[b]);
      critical = on_path[a] || on_path[b];
    } else {
      if (!call_ok[size_t(f.call)]) continue;
      t0 = call_t0[size_t(f.call)];
      critical = call_critical[size_t(f.call)];
    }
    const double t1 = std::max(t0, std::min(times.end[a], times.end[b]));
    out.push_back({sets.set(f.src_rank, f.dst_rank, f.dst_replica), f.bytes, t0, t1, f.phase, critical, f.spanning, f.ring});
  }
  return out;
}

// The flows' indices by (t0, index): the order in which each link's running
// merges and byte sums take them. A stable radix sort of t0's bits (a
// non-negative double's bits order as the number does; -0 is made +0, which
// compares equal to it) gives exactly std::sort's order of (t0, index) pairs,
// in linear time: a default step has ~10^5 transfers.
std::vector<uint32_t> start_order(const std::vector<Flow>& fl) {
  const size_t n = fl.size();
  std::vector<uint64_t> key(n);
  bool plain = true;
  for (size_t i = 0; i < n; ++i) {
    const double t0 = fl[i].t0 + 0.0;
    plain = plain && t0 >= 0;
    std::memcpy(&key[i], &t0, sizeof t0);
  }
  std::vector<uint32_t> order(n), next(n);
  for (size_t i = 0; i < n; ++i) order[i] = uint32_t(i);
  if (!plain) {  // a negative or NaN start (a measured Timeline's, say): the comparison sort
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return std::pair{fl[a].t0, a} < std::pair{fl[b].t0, b};
    });
    return order;
  }
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t(1) << kBits;
  std::vector<size_t> count(kBuckets);
  for (int shift = 0; shift < 64; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (size_t i = 0; i < n; ++i) ++count[(key[i] >> shift) & (kBuckets - 1)];
    if (n == 0 || count[(key[0] >> shift) & (kBuckets - 1)] == n) continue;  // one digit for all: order kept
    size_t at = 0;
    for (size_t& c : count) at += std::exchange(c, at);
    for (const uint32_t i : order) next[count[(key[i] >> shift) & (kBuckets - 1)]++] = i;
    order.swap(next);
  }
  return order;
}

// Under the data-parallel shortcut most links carry one replica's transfers
// only: a link inside replica k's nodes sees exactly the translates of what its
// image in replica 0 sees, in the same order. Such a link's sums and unions are
// its image's, figure for figure, except `critical` (only replica 0's and the
// spanning calls' transfers are on the critical path), so they are copied from
// it instead of accumulated once per translate. copy_of[l] is that image, or -1
// where l must be accumulated (replica 0's links, links shared by translates,
// links whose translate pairing is not one to one). The proof is a count: every
// use of l by the k-th translate of a route set pairs (by route position) with
// its replica-0 route's use of copy_of[l], one per transfer; equal use counts
// make that pairing a bijection, so both see the same transfers.
std::vector<int32_t> translate_copies(const core::LinkTraffic& tr, const std::vector<Flow>& fl) {
  const size_t R = size_t(tr.replicas), sets = tr.route_sets.size() / std::max<size_t>(R, 1);
  std::vector<int32_t> copy_of(tr.links, -1);
  if (R <= 1) return copy_of;
  std::vector<int64_t> uses_of_set(sets, 0);  // transfers with bytes naming each route set
  for (const Flow& f : fl)
    if (f.bytes > 0) ++uses_of_set[size_t(f.routes)];
  constexpr int32_t kNone = -1, kConflict = -2;
  std::vector<int32_t> image(tr.links, kNone), replica(tr.links, kNone);  // per link: its pairing, the k using it
  std::vector<int64_t> uses(tr.links, 0);
  std::vector<char> translated(tr.links, 0);  // used by some translate (k >= 1)
  auto pair_with = [&](int l, int32_t img, int32_t k) {
    int32_t& i = image[size_t(l)];
    int32_t& r = replica[size_t(l)];
    if (i == kNone) i = img, r = k;
    else if (i != img || r != k) i = kConflict;
  };
  for (size_t set = 0; set < sets; ++set) {
    const int64_t n = uses_of_set[set];
    if (n == 0) continue;
    const auto& base = tr.routes[size_t(tr.route_sets[set * R])].links;
    for (size_t k = 0; k < R; ++k) {
      const auto& links = tr.routes[size_t(tr.route_sets[set * R + k])].links;
      for (size_t p = 0; p < links.size(); ++p) {
        const int l = links[p];
        uses[size_t(l)] += n;
        if (k == 0) {
          pair_with(l, l, 0);
          continue;
        }
        translated[size_t(l)] = 1;
        pair_with(l, links.size() == base.size() ? base[p] : kConflict, int32_t(k));
      }
    }
  }
  for (size_t l = 0; l < tr.links; ++l) {
    const int32_t img = image[l];
    if (img < 0 || replica[l] <= 0 || translated[size_t(img)] || uses[l] != uses[size_t(img)]) continue;
    copy_of[l] = img;
  }
  return copy_of;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

using Interval = std::pair<double, double>;

// The union of the intervals as disjoint intervals in order (v sorted in place).
std::vector<Interval> merged(std::vector<Interval>& v) {
  // One stream's events come in start order: sort only what interleaves streams.
  auto by_start = [](const Interval& x, const Interval& y) { return x.first < y.first; };
  if (!std::is_sorted(v.begin(), v.end(), by_start)) core::sort_intervals(v);
  std::vector<Interval> out;
  for (const auto& [a, b] : v) {
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.emplace_back(a, b);
  }
  return out;
}

double length(const std::vector<Interval>& u) {
  double total = 0;
  for (const auto& [a, b] : u) total += b - a;
  return total;
}

// Length of x minus y, both disjoint and in order.
double minus_length(const std::vector<Interval>& x, const std::vector<Interval>& y) {
  double out = 0;
  size_t j = 0;
  for (const auto& [a, b] : x) {
    double covered = 0;
    while (j < y.size() && y[j].second <= a) ++j;
    for (size_t k = j; k < y.size() && y[k].first < b; ++k)
      covered += std::min(b, y[k].second) - std::max(a, y[k].first);
    out += (b - a) - covered;
  }
  return out;
}

// A Timeline's events per rank and phase (those on a stream the Schedule has, with a phase).
core::PhaseIntervals phase_intervals(const schedule::Schedule& s, const traces::Timeline& tl) {
  core::PhaseIntervals iv(s.ranks.size());
  for (const traces::Event& e : tl.events) {
    const schedule::Stream* st = s.find_stream(e.rank, e.stream);
    // The event's own phase: the Schedule's op would be a cache miss per event.
    const auto phase = schedule::parse_phase(e.phase);
    if (!st || !phase) continue;
    const size_t r = size_t(e.rank), p = size_t(*phase);
    iv.seen[p] = true;
    if (st->kind == schedule::StreamKind::compute) {
      iv.compute[r].emplace_back(e.start_s, e.end_s);
      iv.phase_compute[r][p].emplace_back(e.start_s, e.end_s);
    } else {
      iv.phase_comm[r][p].emplace_back(e.start_s, e.end_s);
    }
  }
  return iv;
}

core::PhaseFigures phase_figures(core::PhaseIntervals& iv) {
  const size_t R = iv.compute.size();
  core::PhaseFigures f(R);
  f.seen = iv.seen;
  for (size_t r = 0; r < R; ++r) {
    const std::vector<Interval> compute_union = merged(iv.compute[r]);
    for (size_t p = 0; p < schedule::kPhaseCount; ++p) {
      if (!iv.seen[p]) continue;
      f.compute[r][p] = length(merged(iv.phase_compute[r][p]));
      // The phase's communication while no compute stream of the rank runs is exposed.
      f.exposed[r][p] = minus_length(merged(iv.phase_comm[r][p]), compute_union);
    }
  }
  return f;
}

std::string pct(double f) { return fmt::format("{:.0f}%", 100 * f); }

std::string kind_label(const std::string& kind) {
  if (kind == "nvlink") return "NVLink";
  if (kind == "pcie") return "PCIe";
  if (kind == "nic") return "NIC";
  return "fabric";
}

}  // namespace

BoundBy bound_by(const schedule::Schedule& s, const traces::Timeline& tl, const topology::Topology& t,
                 const cost::CostModel& m, const CriticalPath& cp, double step_imbalance,
                 const schedule::CommMatching* match) {
  const core::FlowPlan fp =
      match ? core::flow_plan(s, *match) : core::flow_plan(s, schedule::match_comms(s));
  core::PhaseIntervals iv = phase_intervals(s, tl);
  return core::bound_by(s, fp, spans_of(s, tl), tl.makespan_s(), iv, t, m, cp, step_imbalance);
}

namespace core {

std::vector<PhaseBound> phase_bounds(const PhaseFigures& f, const CriticalPath& cp) {
  const size_t R = f.compute.size();
  std::vector<PhaseBound> out;
  for (size_t p = 0; p < schedule::kPhaseCount; ++p) {
    if (!f.seen[p]) continue;
    PhaseBound b;
    b.phase = Phase(p);
    for (size_t r = 0; r < R; ++r) {
      const double c = f.compute[r][p], x = f.exposed[r][p];
      b.compute_mean_s += c / double(R);
      b.exposed_comm_mean_s += x / double(R);
      b.compute_max_s = std::max(b.compute_max_s, c);
      b.exposed_comm_max_s = std::max(b.exposed_comm_max_s, x);
    }
    for (const CriticalPathShare& sh : cp.by_kind)
      if (sh.phase == b.phase) (schedule::is_compute(sh.kind) ? b.critical_compute_s : b.critical_comm_s) += sh.seconds;
    out.push_back(b);
  }
  return out;
}

LinkRates link_rates(const topology::Topology& t, const cost::CostModel& m) {
  LinkRates r;
  for (const topology::Link& l : t.links()) {
    r.kind.push_back(link_kind(t, l));
    r.rate.push_back(m.link_rate_Bps(l));
    r.kind_id.push_back(uint8_t(std::find(kLinkKinds.begin(), kLinkKinds.end(), r.kind.back()) - kLinkKinds.begin()));
  }
  return r;
}

uint8_t slowest_kind(const std::vector<int>& route, const LinkRates& r) {
  if (route.empty()) return 0;
  int slowest = route.front();
  for (int id : route)
    if (r.rate[size_t(id)] < r.rate[size_t(slowest)]) slowest = id;  // the first on ties, in route order
  return r.kind_id[size_t(slowest)];
}

RouteSetIndex::RouteSetIndex(std::vector<int> gpu_of_rank, int replicas, int ranks_per_replica)
    : gpu_(std::move(gpu_of_rank)), replicas_(std::max(1, replicas)), shift_(ranks_per_replica) {}

std::pair<int32_t, bool> RouteSetIndex::find(int src_rank, int dst_rank, int dst_k) {
  const uint64_t key = (uint64_t(src_rank) * gpu_.size() + uint64_t(dst_rank)) * uint64_t(replicas_) + uint64_t(dst_k);
  if (key == last_key_) return {last_, false};
  last_key_ = key;
  auto [it, fresh] = set_of_.try_emplace(key, int32_t(set_of_.size()));
  last_ = it->second;
  return {last_, fresh};
}

RouteSets::RouteSets(const topology::Topology& t, std::vector<int> gpu_of_rank, int replicas, int ranks_per_replica,
                     LinkTraffic& tr)
    : t_(t), index_(std::move(gpu_of_rank), replicas, ranks_per_replica), tr_(tr) {
  tr_.replicas = index_.replicas();
}

int32_t RouteSets::route(int a, int b) {
  auto [it, fresh] = route_of_.try_emplace(uint64_t(uint32_t(a)) << 32 | uint32_t(b), int32_t(tr_.routes.size()));
  if (fresh) {
    const topology::Route& r = t_.route(a, b);
    tr_.routes.push_back({a, b, r.links, r.inter_node});
  }
  return it->second;
}

int32_t RouteSets::set(int src_rank, int dst_rank, int dst_k) {
  const auto [set, fresh] = index_.find(src_rank, dst_rank, dst_k);
  if (fresh)  // a replica-symmetric Schedule: every transfer also runs in each other replica, on translated GPUs
    for (int k = 0; k < index_.replicas(); ++k) {
      const auto [a, b] = index_.gpus(src_rank, dst_rank, dst_k, k);
      tr_.route_sets.push_back(route(a, b));
    }
  return set;
}

const std::vector<CallPair>& CallPairs::of(const schedule::CallShapeKey& key) {
  auto [it, fresh] = shapes_.try_emplace(key);
  std::vector<CallPair>& pairs = it->second;
  if (!fresh) return pairs;
  // Bytes per (sender, receiver): the plan's transfers sorted by pair, runs summed in plan order.
  const auto plan = cost::plan_collective(key);
  order_.resize(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) order_[i] = uint32_t(i);
  std::stable_sort(order_.begin(), order_.end(), [&](uint32_t x, uint32_t y) {
    return std::pair{plan[x].src, plan[x].dst} < std::pair{plan[y].src, plan[y].dst};
  });
  for (size_t i = 0; i < order_.size();) {
    const int src = plan[order_[i]].src, dst = plan[order_[i]].dst;
    double bytes = 0;
    for (; i < order_.size() && plan[order_[i]].src == src && plan[order_[i]].dst == dst; ++i) bytes += plan[order_[i]].bytes;
    pairs.push_back({src, dst, bytes});
  }
  return pairs;
}

FlowPlan flow_plan(const schedule::Schedule& s, const schedule::CommMatching& match) {
  FlowPlan fp;
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::send) continue;
    const OpId peer = match.partner[size_t(op.id)];
    if (peer < 0) continue;
    fp.flows.push_back({op.id, peer, -1, op.rank, s.ops[size_t(peer)].rank, double(s.desc(op).bytes), op.phase, op.step >= 0});
  }
  // A call's (sender, receiver) pairs depend on its kind, size, bytes and root
  // only: a step repeats a few shapes over hundreds of calls (every layer's
  // gradient collectives), and planning and sorting a 4,096-member call's plan
  // per call was ~10% of a large symmetric plan search.
  CallPairs shapes;
  for (size_t c = 0; c < match.calls.size(); ++c) {
    const auto& call = match.calls[c];
    if (call.empty() || std::any_of(call.begin(), call.end(), [](OpId id) { return id < 0; })) continue;
    const Op& first = s.ops[size_t(call.front())];
    // A group spanning replicas: the plan of all its members' transfers from replica 0's (dst a full member index).
    const schedule::CallShapeKey key = schedule::call_shape_key(s, call);
    const int n = key.members;
    for (const CallPair& p : shapes.of(key)) {
      const OpId a = call[size_t(p.src)], b = call[size_t(p.dst % n)];
      fp.flows.push_back({a, b, int64_t(c), s.ops[size_t(a)].rank, s.ops[size_t(b)].rank, p.bytes, first.phase,
                          first.step >= 0, p.dst / n, key.spanning()});
    }
  }
  fp.calls = match.calls;
  return fp;
}

LinkTraffic link_traffic(const schedule::Schedule& s, const FlowPlan& fp, const OpSpans& times, PhaseIntervals& phases,
                         const topology::Topology& t, const CriticalPath& cp) {
  LinkTraffic tr;
  std::vector<char> on_path(s.ops.size(), 0);
  for (OpId id : cp.ops)
    if (id >= 0 && size_t(id) < on_path.size()) on_path[size_t(id)] = 1;
  // Links: bytes, busy intervals and critical seconds; per traffic class, its bytes and links.
  tr.links = t.links().size();
  tr.acc.resize(tr.links);
  for (auto& u : tr.uses) u.assign(tr.links, 0);
  // In start order, so each link's busy time is a running merge of its transfers' intervals.
  const std::vector<Flow> fl = flows(s, t, fp, times, on_path, tr);
  // A transfer's translates follow it (replica k after k - 1): the order of
  // every replica's transfers sorted by (start, replica 0's order, k).
  const size_t R = size_t(tr.replicas);
  const std::vector<int32_t> copy_of = translate_copies(tr, fl);
  // Per route: every link of it is a copy (its translate uses need no visit unless critical).
  std::vector<char> all_copies(tr.routes.size(), 0);
  for (size_t k = 0; k < tr.routes.size(); ++k) {
    const auto& links = tr.routes[k].links;
    all_copies[k] = !links.empty() && std::all_of(links.begin(), links.end(), [&](int l) { return copy_of[size_t(l)] >= 0; });
  }
  for (const uint32_t i : start_order(fl)) {
    const Flow& f = fl[i];
    if (f.bytes <= 0) continue;
    bool counted = false;
    for (size_t k = 0; k < R; ++k) {
      const size_t route = size_t(tr.route_sets[size_t(f.routes) * R + k]);
      const LinkTraffic::RouteUse& r = tr.routes[route];
      if (r.links.empty()) continue;
      const size_t c = r.inter_node ? 1 : 0;
      const bool critical = f.critical && (k == 0 || f.spanning);
      tr.class_bytes[c] += f.bytes;
      counted = true;
      if (all_copies[route] && !critical) continue;
      for (int id : r.links) {
        LinkAcc& a = tr.acc[size_t(id)];
        if (copy_of[size_t(id)] >= 0) {  // its image's figures, copied below; its critical union is its own
          if (critical) a.critical.add(f.t0, f.t1);
          continue;
        }
        a.bytes += f.bytes;
        a.phase_bytes[size_t(f.phase)] += f.bytes;
        a.busy.add(f.t0, f.t1);
        a.phase_busy[size_t(f.phase)].add(f.t0, f.t1);
        if (critical) a.critical.add(f.t0, f.t1);
        if (f.ring) a.ring_bytes += f.bytes, a.ring.add(f.t0, f.t1);
      }
    }
    if (counted) tr.counted.emplace_back(f.routes, f.bytes);
  }
  for (size_t l = 0; l < tr.links; ++l) {
    if (copy_of[l] < 0) continue;
    const IntervalUnion critical = tr.acc[l].critical;
    tr.acc[l] = tr.acc[size_t(copy_of[l])];
    tr.acc[l].critical = critical;
  }
  // Which links each traffic class crosses: those of every route a transfer with bytes used.
  std::vector<char> used_set(tr.route_sets.size() / std::max<size_t>(R, 1), 0);
  for (const Flow& f : fl)
    if (f.bytes > 0) used_set[size_t(f.routes)] = 1;
  for (size_t set = 0; set < used_set.size(); ++set) {
    if (!used_set[set]) continue;
    for (size_t k = 0; k < R; ++k) {
      const LinkTraffic::RouteUse& r = tr.routes[size_t(tr.route_sets[set * R + k])];
      for (int id : r.links) tr.uses[r.inter_node ? 1 : 0][size_t(id)] = 1;
    }
  }
  tr.phases = phase_bounds(phase_figures(phases), cp);
  return tr;
}

bool same_routes(const LinkTraffic& tr, const topology::Topology& t) {
  if (t.links().size() != tr.links) return false;
  for (const LinkTraffic::RouteUse& u : tr.routes) {
    const topology::Route& r = t.route(u.src_gpu, u.dst_gpu);
    if (r.links != u.links || r.inter_node != u.inter_node) return false;
  }
  return true;
}

BoundBy bound_by(const schedule::Schedule& s, const FlowPlan& fp, const OpSpans& times, double step,
                 PhaseIntervals& phases, const topology::Topology& t, const cost::CostModel& m,
                 const CriticalPath& cp, double step_imbalance) {
  return bound_by(link_traffic(s, fp, times, phases, t, cp), t, m, cp, step, step_imbalance);
}

BoundBy bound_by(const LinkTraffic& tr, const topology::Topology& t, const cost::CostModel& m, const CriticalPath& cp,
                 double step, double step_imbalance) {
  BoundBy b;
  const auto& links = t.links();
  const std::vector<LinkAcc>& acc = tr.acc;
  const LinkRates lr = link_rates(t, m);
  const std::vector<std::string>& kinds = lr.kind;
  const std::vector<double>& rate = lr.rate;
  const std::array<std::string, 4>& kind_names = kLinkKinds;
  // Per traffic class, bytes by the kind of the slowest effective link of their route.
  struct ClassAcc {
    double bytes = 0;
    std::array<double, 4> capped{};  // per kind_names entry: bytes it caps
    const std::vector<char>* uses;   // per link: some route of the class crosses it
  };
  std::array<ClassAcc, 2> cls;
  for (size_t c = 0; c < 2; ++c) cls[c].bytes = tr.class_bytes[c], cls[c].uses = &tr.uses[c];
  if (tr.capped) {
    for (size_t c = 0; c < 2; ++c) cls[c].capped = (*tr.capped)[c];
  } else {
    std::vector<uint8_t> slowest(tr.routes.size(), 0);
    for (size_t k = 0; k < tr.routes.size(); ++k) slowest[k] = slowest_kind(tr.routes[k].links, lr);
    const size_t R = size_t(tr.replicas);
    for (const auto& [set, bytes] : tr.counted)  // in the transfers' start order, as the sums always ran
      for (size_t k = 0; k < R; ++k) {
        const size_t route = size_t(tr.route_sets[size_t(set) * R + k]);
        if (tr.routes[route].links.empty()) continue;  // not counted (link_traffic)
        cls[tr.routes[route].inter_node ? 1 : 0].capped[slowest[route]] += bytes;
      }
  }
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkAcc& a = acc[i];
    if (a.bytes <= 0) continue;
    LinkLoad l;
    l.link = int(i);
    l.name = links[i].name;
    l.kind = kinds[i];
    l.rate_GBps = rate[i] / 1e9;
    l.bytes = a.bytes;
    l.critical_s = a.critical.length();
    l.ring_bytes = a.ring_bytes;
    l.ring_busy_s = a.ring.length();
    l.ring_utilisation = ratio(a.ring_bytes, rate[i] * l.ring_busy_s);
    l.busy_s = a.busy.length();
    l.utilisation = ratio(a.bytes, rate[i] * step);
    l.busy_utilisation = ratio(a.bytes, rate[i] * l.busy_s);
    for (size_t p = 0; p < a.phase_bytes.size(); ++p)
      if (a.phase_bytes[p] > 0) {
        const double busy_p = a.phase_busy[p].length();
        l.phases.push_back({Phase(p), a.phase_bytes[p], busy_p, ratio(a.phase_bytes[p], rate[i] * busy_p)});
      }
    b.links.push_back(std::move(l));
  }
  std::stable_sort(b.links.begin(), b.links.end(),
                   [](const LinkLoad& x, const LinkLoad& y) { return x.utilisation > y.utilisation; });

  std::map<std::string, KindLoad> per_kind;
  for (const LinkLoad& l : b.links) {
    KindLoad& k = per_kind.try_emplace(l.kind, KindLoad{l.kind, 0, 0, l.name, l.utilisation, l.busy_utilisation}).first->second;
    ++k.links;
    k.bytes += l.bytes;
  }
  for (auto& [name, k] : per_kind) b.kinds.push_back(std::move(k));

  // What caps each traffic class, and the busiest link of every kind its routes cross.
  std::vector<int> index_of(links.size(), -1);
  for (size_t i = 0; i < b.links.size(); ++i) index_of[size_t(b.links[i].link)] = int(i);
  for (int inter = 0; inter < 2; ++inter) {
    const ClassAcc& c = cls[size_t(inter)];
    if (c.bytes <= 0) continue;
    TrafficCap cap;
    cap.inter_node = inter == 1;
    cap.bytes = c.bytes;
    for (size_t k = 0; k < kind_names.size(); ++k)
      if (c.capped[k] > cap.capped_share) cap.capped_by = kind_names[k], cap.capped_share = c.capped[k];  // ties: the first name
    cap.capped_share /= c.bytes;
    std::map<std::string, const LinkLoad*> busiest;  // b.links is busiest first: the first seen per kind
    for (const LinkLoad& l : b.links)
      if ((*c.uses)[size_t(l.link)]) busiest.try_emplace(l.kind, &l);
    for (const auto& [kind, l] : busiest)
      cap.kinds.push_back({kind, l->name, l->rate_GBps, l->utilisation, l->busy_utilisation, l->ring_utilisation,
                           c.capped[size_t(std::find(kind_names.begin(), kind_names.end(), kind) - kind_names.begin())] /
                               c.bytes,
                           kind == cap.capped_by,
                           l->busy_utilisation >= kSaturatedUtilisation});
    std::stable_partition(cap.kinds.begin(), cap.kinds.end(), [](const TrafficKind& k) { return k.bottleneck; });
    // The note: what caps it, at what load, and which faster kinds on the same routes are not the bottleneck.
    const TrafficKind& top = cap.kinds.front();
    auto ring = [](const TrafficKind& k) {
      return k.ring_utilisation > 0 ? fmt::format(" ({} during the ring steps)", pct(k.ring_utilisation)) : std::string();
    };
    std::string note = fmt::format("{} traffic ({:.1f} GB): {:.0f}% of it capped by {} ({}, {:.3g} GB/s effective) at "
                                   "{} while busy{}, {} of the step",
                                   cap.inter_node ? "inter-node" : "intra-node", cap.bytes / 1e9,
                                   100 * cap.capped_share, kind_label(top.kind), top.link, top.rate_GBps,
                                   pct(top.busy_utilisation), ring(top), pct(top.utilisation));
    for (size_t k = 1; k < cap.kinds.size(); ++k) {
      const TrafficKind& o = cap.kinds[k];
      note += fmt::format("; {} {} ({:.3g} GB/s) at {} while busy{}: {}", kind_label(o.kind), o.link, o.rate_GBps,
                          pct(o.busy_utilisation), ring(o),
                          o.capped_share > 0 ? fmt::format("caps {:.0f}% of these bytes", 100 * o.capped_share)
                          : o.saturated ? std::string("saturated too: shared by several transfers, it may hold them back")
                                        : fmt::format("the {} is not the bottleneck", kind_label(o.kind)));
    }
    b.notes.push_back(note);
    b.traffic.push_back(std::move(cap));
  }

  b.phases = tr.phases;
  for (const CriticalPathShare& sh : cp.by_kind)
    if (sh.kind == OpKind::attn_fwd || sh.kind == OpKind::attn_bwd) b.attention_critical_s += sh.seconds;
  if (step_imbalance > 1) b.imbalance_lost_s = b.attention_critical_s * (1 - 1 / step_imbalance);

  // The verdict, from the critical path.
  const double len = cp.length_s;
  b.critical_length_s = len;
  if (len <= 0 || cp.ops.empty()) {
    b.verdict = "empty: the Timeline has no critical path";
    return b;
  }
  if (cp.communication_s > cp.compute_s) {
    // The link that the critical path's transfers load most: seconds crossing it x how full it runs.
    double best = 0;
    for (size_t i = 0; i < b.links.size(); ++i) {
      const double score = b.links[i].critical_s * b.links[i].busy_utilisation;
      if (score > best) best = score, b.bottleneck = int(i);
    }
    const std::string share = fmt::format("communication holds {} of the critical path", pct(cp.communication_s / len));
    if (b.bottleneck >= 0 && b.links[size_t(b.bottleneck)].busy_utilisation >= kLinkBoundUtilisation) {
      const LinkLoad& l = b.links[size_t(b.bottleneck)];
      b.kind = BoundKind::link;
      b.verdict = fmt::format("bound by {} link {}: {} while busy ({:.3g} GB/s effective); {}", kind_label(l.kind),
                              l.name, pct(l.busy_utilisation), l.rate_GBps, share);
    } else {
      b.kind = BoundKind::latency;
      b.verdict = b.bottleneck >= 0
                      ? fmt::format("latency-bound: {}, but its busiest link ({}) runs {} full while busy", share,
                                    b.links[size_t(b.bottleneck)].name, pct(b.links[size_t(b.bottleneck)].busy_utilisation))
                      : fmt::format("latency-bound: {}, on no link (local copies)", share);
    }
    return b;
  }
  if (b.imbalance_lost_s >= kImbalanceBoundShare * len) {
    b.kind = BoundKind::imbalance;
    b.verdict = fmt::format("bound by imbalance: the slowest rank's attention costs ~{} of the step (step-level "
                            "imbalance {:.3f} on {:.3g} s of attention on the critical path)",
                            pct(b.imbalance_lost_s / len), step_imbalance, b.attention_critical_s);
    return b;
  }
  b.kind = BoundKind::compute;
  b.verdict = fmt::format("compute-bound: compute holds {} of the critical path, communication {}",
                          pct(cp.compute_s / len), pct(cp.communication_s / len));
  return b;
}

}  // namespace core

namespace {

nlohmann::json link_json(const LinkLoad& l) {
  nlohmann::json phases = nlohmann::json::array();
  for (const LinkPhaseLoad& p : l.phases)
    phases.push_back({{"phase", schedule::to_string(p.phase)}, {"bytes", p.bytes}, {"busy_s", p.busy_s},
                      {"utilisation", p.utilisation}});
  return {{"name", l.name},
          {"kind", l.kind},
          {"rate_GBps", l.rate_GBps},
          {"bytes", l.bytes},
          {"busy_s", l.busy_s},
          {"utilisation", l.utilisation},
          {"busy_utilisation", l.busy_utilisation},
          {"critical_s", l.critical_s},
          {"phases", phases},
          {"ring_steps", {{"bytes", l.ring_bytes}, {"busy_s", l.ring_busy_s}, {"utilisation", l.ring_utilisation}}}};
}

}  // namespace

nlohmann::json to_json(const BoundBy& b) {
  nlohmann::json links = nlohmann::json::array();
  for (size_t i = 0; i < b.links.size() && i < kMaxJsonLinks; ++i) links.push_back(link_json(b.links[i]));
  nlohmann::json link_kinds = nlohmann::json::array();
  for (const KindLoad& k : b.kinds)
    link_kinds.push_back({{"kind", k.kind}, {"links", k.links}, {"bytes", k.bytes}, {"busiest", k.busiest},
                     {"utilisation", k.utilisation}, {"busy_utilisation", k.busy_utilisation}});
  nlohmann::json traffic = nlohmann::json::array();
  for (const TrafficCap& c : b.traffic) {
    nlohmann::json kinds = nlohmann::json::array();
    for (const TrafficKind& k : c.kinds)
      kinds.push_back({{"kind", k.kind}, {"link", k.link}, {"rate_GBps", k.rate_GBps}, {"utilisation", k.utilisation},
                       {"busy_utilisation", k.busy_utilisation}, {"ring_utilisation", k.ring_utilisation},
                       {"capped_share", k.capped_share},
                       {"bottleneck", k.bottleneck}, {"saturated", k.saturated}});
    traffic.push_back({{"traffic", c.inter_node ? "inter_node" : "intra_node"}, {"bytes", c.bytes},
                       {"capped_by", c.capped_by}, {"capped_share", c.capped_share}, {"kinds", kinds}});
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseBound& p : b.phases)
    phases.push_back({{"phase", schedule::to_string(p.phase)},
                      {"compute_mean_s", p.compute_mean_s},
                      {"compute_max_s", p.compute_max_s},
                      {"exposed_comm_mean_s", p.exposed_comm_mean_s},
                      {"exposed_comm_max_s", p.exposed_comm_max_s},
                      {"critical_compute_s", p.critical_compute_s},
                      {"critical_comm_s", p.critical_comm_s}});
  return {{"kind", to_string(b.kind)},
          {"verdict", b.verdict},
          {"brief", brief(b)},
          {"bottleneck", b.bottleneck >= 0 ? link_json(b.links[size_t(b.bottleneck)]) : nlohmann::json(nullptr)},
          {"links", links},
          {"links_total", b.links.size()},
          {"link_kinds", link_kinds},
          {"traffic", traffic},
          {"phases", phases},
          {"imbalance", {{"attention_critical_s", b.attention_critical_s}, {"lost_s", b.imbalance_lost_s}}},
          {"notes", b.notes}};
}

std::string brief(const BoundBy& b) {
  switch (b.kind) {
    case BoundKind::link: {
      const LinkLoad& l = b.links[size_t(b.bottleneck)];
      return fmt::format("link {} {} {}", l.kind, l.name, pct(l.busy_utilisation));
    }
    case BoundKind::imbalance: return fmt::format("imbalance {}", pct(b.imbalance_lost_s / b.critical_length_s));
    default: return std::string(to_string(b.kind));
  }
}

std::string to_text(const BoundBy& b, double step_time_s) {
  constexpr size_t kTextLinks = 5;
  const double per_s = step_time_s >= 1 ? 1 : step_time_s >= 1e-3 ? 1e3 : 1e6;
  const char* unit = step_time_s >= 1 ? "s" : step_time_s >= 1e-3 ? "ms" : "us";
  auto secs = [&](double s) { return fmt::format("{:.3f} {}", s * per_s, unit); };
  std::string out = fmt::format("bound by       {}\n", b.verdict);
  for (const std::string& n : b.notes) out += "  " + n + "\n";
  if (!b.links.empty()) {
    out += fmt::format("  busiest links ({} carried traffic; utilisation = bytes / (effective rate x time))\n",
                       b.links.size());
    size_t w = 4;
    for (size_t i = 0; i < b.links.size() && i < kTextLinks; ++i) w = std::max(w, b.links[i].name.size());
    out += fmt::format("    {:<{}}  {:<6}  {:>10}  {:>9}  {:>10}  {:>9}  {:>10}  {}\n", "link", w, "kind", "GB/s eff",
                       "of step", "busy", "when busy", "ring steps", "busiest phase");
    for (size_t i = 0; i < b.links.size() && i < kTextLinks; ++i) {
      const LinkLoad& l = b.links[i];
      const LinkPhaseLoad* top = nullptr;
      for (const LinkPhaseLoad& p : l.phases)
        if (!top || p.bytes > top->bytes) top = &p;
      out += fmt::format("    {:<{}}  {:<6}  {:>10.3g}  {:>9}  {:>10}  {:>9}  {:>10}  {}\n", l.name, w, l.kind,
                         l.rate_GBps, fmt::format("{:.1f}%", 100 * l.utilisation), secs(l.busy_s),
                         fmt::format("{:.1f}%", 100 * l.busy_utilisation),
                         l.ring_bytes > 0 ? fmt::format("{:.1f}%", 100 * l.ring_utilisation) : std::string("-"),
                         top ? fmt::format("{} at {:.1f}%", schedule::to_string(top->phase), 100 * top->utilisation)
                             : std::string());
    }
  }
  if (!b.phases.empty()) {
    auto num = [&](double s) { return fmt::format("{:.3f}", s * per_s); };
    out += fmt::format("  per phase, {} (mean / max over ranks; critical: time on the critical path)\n", unit);
    out += fmt::format("    {:<10}  {:>19}  {:>19}  {:>16}  {:>13}\n", "phase", "compute", "exposed comm",
                       "critical compute", "critical comm");
    for (const PhaseBound& p : b.phases)
      out += fmt::format("    {:<10}  {:>19}  {:>19}  {:>16}  {:>13}\n", schedule::to_string(p.phase),
                         num(p.compute_mean_s) + " / " + num(p.compute_max_s),
                         num(p.exposed_comm_mean_s) + " / " + num(p.exposed_comm_max_s), num(p.critical_compute_s),
                         num(p.critical_comm_s));
  }
  return out;
}

}  // namespace rm::report
