#include "sim/replay/replay.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "sim/engine/analytic.hpp"
#include "sim/engine/simgrid_engine.hpp"
#include "sim/schedule/builder.hpp"

namespace rm::replay {

using schedule::Op;
using schedule::OpId;
using schedule::OpKind;
using traces::Event;
using traces::StreamKey;

std::string_view to_string(OpRole r) {
  switch (r) {
    case OpRole::gpu: return "gpu";
    case OpRole::gpu_gap: return "gpu_gap";
    case OpRole::collective: return "collective";
    case OpRole::nccl_fixed: return "nccl_fixed";
    case OpRole::nccl_wait: return "nccl_wait";
    case OpRole::ghost: return "ghost";
    case OpRole::host: return "host";
    case OpRole::host_sync: return "host_sync";
  }
  return "?";
}

namespace {

// One NCCL call: its kernels on the recorded ranks and how it is replayed.
struct Call {
  std::vector<int64_t> kernels;  // recorded op ids, by rank
  double first_start = 0;
  enum class Mode { collective, p2p, fixed } mode = Mode::fixed;
  std::string reason;            // Mode::fixed: why
  OpKind kind = OpKind::all_reduce;
  std::vector<int> members;      // global ranks, group order
  int root = 0;                  // broadcast: member index; p2p: the sender's member index
  int64_t bytes = 0;
  int group = -1;                // Schedule group (collective)
  int64_t tag = 0;
  std::map<int64_t, double> wait_s;  // per recorded kernel: the wait on unrecorded members
};

std::optional<OpKind> collective_kind(const std::string& k) {
  if (k == "allreduce") return OpKind::all_reduce;
  if (k == "allgather") return OpKind::all_gather;
  if (k == "reduce_scatter") return OpKind::reduce_scatter;
  if (k == "alltoall") return OpKind::all_to_all;
  if (k == "broadcast") return OpKind::broadcast;
  if (k == "send") return OpKind::send;
  if (k == "recv") return OpKind::recv;
  return std::nullopt;
}

struct UnionFind {
  std::unordered_map<int64_t, int64_t> parent;
  int64_t find(int64_t x) {
    auto it = parent.find(x);
    if (it == parent.end()) return parent[x] = x;
    if (it->second == x) return x;
    const int64_t r = find(it->second);
    parent[x] = r;
    return r;
  }
  void join(int64_t a, int64_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

// Seconds each member's op of one call takes alone on `t` (all posted at 0):
// what the engine would charge it contention-free. Keyed by the call's shape.
class AloneTimes {
 public:
  AloneTimes(const topology::Topology& t, const cost::CostModel& m) : t_(t), m_(m) {}
  const std::vector<double>& of(const Call& c) {
    auto key = std::make_tuple(static_cast<int>(c.kind), c.bytes, c.root, c.members);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    schedule::ScheduleBuilder b(nlohmann::json::object(), "replay-alone");
    for (int g : c.members) {
      const int r = b.add_rank(g);
      b.add_stream(r, schedule::StreamKind::comm_intra, "nccl");
    }
    const int n = static_cast<int>(c.members.size());
    if (c.mode == Call::Mode::p2p) {
      schedule::P2PSpec spec;
      spec.send_rank = c.root;
      spec.recv_rank = 1 - c.root;
      spec.bytes = c.bytes;
      b.p2p(spec);
    } else {
      std::vector<int> ranks(static_cast<size_t>(n));
      std::iota(ranks.begin(), ranks.end(), 0);
      const int g = b.add_group(ranks, "call");
      b.collective(g, c.kind, c.bytes, {}, schedule::StreamKind::comm_intra, 0, c.root);
    }
    const schedule::Schedule s = std::move(b).build();
    const engine::OpTimes times = engine::run_analytic(s, t_, m_);
    std::vector<double> per_member(static_cast<size_t>(n), 0.0);
    for (const Op& op : s.ops) per_member[static_cast<size_t>(op.rank)] = times.end[static_cast<size_t>(op.id)];
    return cache_.emplace(std::move(key), std::move(per_member)).first->second;
  }

 private:
  const topology::Topology& t_;
  const cost::CostModel& m_;
  std::map<std::tuple<int, int64_t, int, std::vector<int>>, std::vector<double>> cache_;
};

// A point on a CPU thread: the host op that ends there, and the GPU events a
// synchronize ending there waited for.
struct Point {
  std::vector<int64_t> sync_gpu;
  OpId op = -1;  // -1: time 0 (nothing before it)
};

}  // namespace

ReplayPlan build_replay(const traces::KinetoImport& imp, const topology::Topology& base,
                        const cost::CostModel& base_model) {
  const traces::Timeline& tl = imp.timeline;
  std::unordered_map<int64_t, size_t> at;  // op id -> event index
  at.reserve(tl.events.size());
  for (size_t i = 0; i < tl.events.size(); ++i)
    if (tl.events[i].op >= 0) at.emplace(tl.events[i].op, i);
  auto event = [&](int64_t op) -> const Event* {
    auto it = at.find(op);
    return it == at.end() ? nullptr : &tl.events[it->second];
  };
  auto is_gpu = [&](const Event& e) { return imp.gpu_streams.count(StreamKey{e.rank, e.stream}) > 0; };

  ReplayPlan plan;
  int world = 0;
  std::vector<int> recorded;
  for (const auto& r : imp.ranks) {
    recorded.push_back(r.rank);
    world = std::max(world, r.world_size);
  }
  std::sort(recorded.begin(), recorded.end());
  recorded.erase(std::unique(recorded.begin(), recorded.end()), recorded.end());
  for (const Event& e : tl.events)
    if (!std::binary_search(recorded.begin(), recorded.end(), e.rank)) {
      recorded.push_back(e.rank);
      std::sort(recorded.begin(), recorded.end());
    }
  auto is_recorded = [&](int r) { return std::binary_search(recorded.begin(), recorded.end(), r); };

  // Edges by kind.
  std::unordered_map<int64_t, int64_t> launch_of;                // GPU op -> the CPU call that launched it
  std::unordered_map<int64_t, std::vector<int64_t>> gpu_waits;   // GPU op -> GPU ops it waited for
  std::vector<std::pair<int64_t, int64_t>> cpu_syncs;            // (GPU op, CPU call that waited for it)
  UnionFind calls_uf;
  for (const traces::Edge& e : tl.edges) {
    const Event* from = event(e.from);
    const Event* to = event(e.to);
    if (!from || !to) continue;
    switch (e.kind) {
      case traces::EdgeKind::launch:
        if (!is_gpu(*from) && is_gpu(*to) && from->rank == to->rank) launch_of[e.to] = e.from;
        break;
      case traces::EdgeKind::sync:
        if (!is_gpu(*from) || from->rank != to->rank) break;
        if (is_gpu(*to))
          gpu_waits[e.to].push_back(e.from);
        else
          cpu_syncs.emplace_back(e.from, e.to);
        break;
      case traces::EdgeKind::collective:
        if (imp.collectives.count(e.from) && imp.collectives.count(e.to)) calls_uf.join(e.from, e.to);
        break;
      case traces::EdgeKind::stream:      // stream order is the Schedule's
      case traces::EdgeKind::dependency:  // importers do not emit these
      case traces::EdgeKind::p2p:
        break;
    }
  }

  // The calls, in order of their first recorded kernel.
  std::vector<Call> calls;
  std::unordered_map<int64_t, size_t> call_of;  // NCCL op id -> calls index
  {
    std::map<int64_t, std::vector<int64_t>> by_root;
    for (const auto& [op, info] : imp.collectives)
      if (event(op) && is_gpu(*event(op))) by_root[calls_uf.find(op)].push_back(op);
    for (auto& [root, ops] : by_root) {
      Call c;
      c.kernels = ops;
      std::sort(c.kernels.begin(), c.kernels.end(), [&](int64_t a, int64_t b) {
        return std::pair(event(a)->rank, a) < std::pair(event(b)->rank, b);
      });
      c.first_start = event(c.kernels.front())->start_s;
      for (int64_t k : c.kernels) c.first_start = std::min(c.first_start, event(k)->start_s);
      calls.push_back(std::move(c));
    }
    std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) {
      return std::pair(a.first_start, a.kernels.front()) < std::pair(b.first_start, b.kernels.front());
    });
  }

  // How each call is replayed.
  AloneTimes alone(base, base_model);
  std::set<int> ghosts;
  for (size_t ci = 0; ci < calls.size(); ++ci) {
    Call& c = calls[ci];
    for (int64_t k : c.kernels) call_of[k] = ci;
    const traces::KinetoCollective& info = imp.collectives.at(c.kernels.front());
    auto fixed = [&](std::string why) {
      c.mode = Call::Mode::fixed;
      c.reason = std::move(why);
    };
    const auto kind = collective_kind(info.kind);
    if (!kind) {
      fixed(info.kind == "unknown" ? "kind not recorded nor implied by the kernel name"
                                   : fmt::format("{} is not a Schedule collective", info.kind));
      continue;
    }
    c.kind = *kind;
    if (!info.group_ranks.empty()) {
      c.members = info.group_ranks;
    } else if (info.group_size > 0 && info.group_size == world) {
      c.members.resize(static_cast<size_t>(world));
      std::iota(c.members.begin(), c.members.end(), 0);
    } else {
      fixed("no process group recorded");
      continue;
    }
    if (info.bytes <= 0) {
      fixed("no message size recorded");
      continue;
    }
    c.bytes = info.bytes;
    if (c.members.size() < 2) {
      fixed("a group of one");
      continue;
    }
    std::set<int> kernel_ranks;
    bool consistent = true;
    for (int64_t k : c.kernels) {
      const auto& other = imp.collectives.at(k);
      kernel_ranks.insert(event(k)->rank);
      if (std::find(c.members.begin(), c.members.end(), event(k)->rank) == c.members.end()) consistent = false;
      const bool p2p_pair = (info.kind == "send" && other.kind == "recv") || (info.kind == "recv" && other.kind == "send");
      if (k != c.kernels.front() && (other.bytes != info.bytes || (other.kind != info.kind && !p2p_pair)))
        consistent = false;
    }
    if (!consistent || kernel_ranks.size() != c.kernels.size()) {
      fixed("its recorded kernels disagree on group, kind or size");
      continue;
    }
    bool recorded_member_absent = false;
    for (int m : c.members)
      if (is_recorded(m) && !kernel_ranks.count(m)) recorded_member_absent = true;
    if (recorded_member_absent) {
      fixed("a recorded member's kernel lies outside its trace");
      continue;
    }
    for (int m : c.members)
      if (m < 0 || m >= base.gpus())
        throw std::runtime_error(fmt::format(
            "replay: rank {} (a member of {}'s process group '{}') needs GPU {}, but the cluster has {} GPUs: "
            "pass a --cluster with at least {} GPUs",
            m, info.kind, info.process_group, m, base.gpus(), world > 0 ? world : m + 1));
    if (is_p2p(c.kind)) {
      if (c.members.size() != 2) {
        fixed(fmt::format("{} on a group of {} (no peer recorded)", info.kind, c.members.size()));
        continue;
      }
      c.mode = Call::Mode::p2p;
      // The sender's member index: the recorded send's rank, or the member that is not the recorded recv's.
      const int r0 = event(c.kernels.front())->rank;
      const int idx0 = c.members[0] == r0 ? 0 : 1;
      c.root = info.kind == "send" ? idx0 : 1 - idx0;
    } else {
      c.mode = Call::Mode::collective;
      c.root = 0;  // Kineto records no broadcast root: the group's first member (docs/replay.md)
    }
    c.tag = static_cast<int64_t>(ci);
    const bool missing = kernel_ranks.size() < c.members.size();
    const std::vector<double>& t_alone = alone.of(c);
    // The unrecorded members arrive where the recorded kernels' ends imply:
    // the earliest end minus what the call costs alone on the cluster.
    double arrival = 0;
    bool first = true;
    bool slower = false;
    for (int64_t k : c.kernels) {
      const Event& e = *event(k);
      const auto mi = static_cast<size_t>(std::find(c.members.begin(), c.members.end(), e.rank) - c.members.begin());
      const double a = e.end_s - t_alone[mi];
      arrival = first ? a : std::min(arrival, a);
      first = false;
      if (t_alone[mi] > e.duration_s() * (1 + 1e-12)) slower = true;
    }
    if (slower) ++plan.calls.slower_than_recorded;
    if (missing) {
      ++plan.calls.missing_members;
      for (int64_t k : c.kernels) c.wait_s[k] = std::max(0.0, arrival - event(k)->start_s);
      for (int m : c.members)
        if (!kernel_ranks.count(m)) ghosts.insert(m);
    } else {
      ++plan.calls.resimulated;
    }
  }
  for (const Call& c : calls)
    if (c.mode == Call::Mode::fixed) ++plan.calls.fixed[c.reason];

  // Schedule ranks: the recorded ones, then the ghosts (rank r on GPU r).
  schedule::ScheduleBuilder b(nlohmann::json{{"name", "replay"}}, "replay");
  std::map<int, int> srank;  // global rank -> Schedule rank
  for (int r : recorded) {
    if (r < 0 || r >= base.gpus())
      throw std::runtime_error(fmt::format("replay: rank {} needs GPU {}, but the cluster has {} GPUs: pass a --cluster "
                                           "with at least {} GPUs",
                                           r, r, base.gpus(), std::max(world, r + 1)));
    srank[r] = b.add_rank(r);
    plan.global_rank.push_back(r);
    plan.ghost.push_back(false);
  }
  for (int g : ghosts) {
    srank[g] = b.add_rank(g);
    plan.global_rank.push_back(g);
    plan.ghost.push_back(true);
    plan.missing_ranks.push_back(g);
  }
  for (Call& c : calls) {
    if (c.mode != Call::Mode::collective) continue;
    std::vector<int> ranks;
    for (int m : c.members) ranks.push_back(srank.at(m));
    c.group = b.add_group(ranks, imp.collectives.at(c.kernels.front()).process_group);
  }

  // The op member `mi` (index into c.members) posts for call c, on Schedule rank r's stream gs.
  auto member_op = [&](const Call& c, size_t mi, int r, int gs) {
    Op op;
    op.rank = r;
    op.stream = gs;
    op.tag = static_cast<int32_t>(c.tag);
    if (c.mode == Call::Mode::collective) {
      op.kind = c.kind;
      op.group = c.group;
      if (c.kind == OpKind::broadcast) op.peer = srank.at(c.members[static_cast<size_t>(c.root)]);
    } else {
      op.kind = static_cast<int>(mi) == c.root ? OpKind::send : OpKind::recv;
      op.peer = srank.at(c.members[1 - mi]);
    }
    return op;
  };
  // bytes: a collective's or a transfer's (member_op's ops).
  auto add = [&](Op op, OpRole role, double fixed_s, int64_t ev, double rec_start, double rec_end, int64_t bytes = 0) {
    const OpId id = b.add_op(std::move(op), schedule::OpDesc{0.0, 0, 0, bytes});
    plan.role.push_back(role);
    plan.fixed_s.push_back(fixed_s);
    plan.event.push_back(ev);
    plan.recorded_start.push_back(rec_start);
    plan.recorded_end.push_back(rec_end);
    return id;
  };
  // Stream names are unique per rank (a thread and a stream may share one).
  std::map<std::pair<int, std::string>, int> names_used;
  auto new_stream = [&](int rank, schedule::StreamKind kind, const std::string& name) {
    const int n = names_used[{rank, name}]++;
    return b.add_stream(rank, kind, n == 0 ? name : fmt::format("{} #{}", name, n + 1));
  };
  auto compute_op = [](int rank, int stream, OpKind kind) {
    Op op;
    op.rank = rank;
    op.stream = stream;
    op.kind = kind;
    return op;
  };

  // CPU points: launches, synchronizes, step boundaries.
  std::map<StreamKey, std::map<double, Point>> points;
  std::unordered_map<int64_t, std::pair<StreamKey, double>> launch_point;  // GPU op -> its launch's start
  for (const auto& [gpu, cpu] : launch_of) {
    const Event& c = *event(cpu);
    points[{c.rank, c.stream}][c.start_s];
    launch_point[gpu] = {{c.rank, c.stream}, c.start_s};
  }
  for (const auto& [gpu, cpu] : cpu_syncs) {
    const Event& c = *event(cpu);
    auto& thread = points[{c.rank, c.stream}];
    thread[c.start_s];
    thread[c.end_s].sync_gpu.push_back(gpu);
  }
  // Each step on the thread of its annotation (else the rank's busiest launching thread).
  std::vector<StreamKey> step_thread;
  for (const traces::KinetoStep& st : imp.steps) {
    std::optional<StreamKey> key;
    for (const Event& e : tl.events)
      if (e.rank == st.rank && e.name == st.name && e.start_s == st.start_s && !is_gpu(e)) {
        key = StreamKey{e.rank, e.stream};
        break;
      }
    if (!key) {
      size_t most = 0;
      for (const auto& [k, pts] : points)
        if (k.rank == st.rank && pts.size() > most) most = pts.size(), key = k;
    }
    if (!key) key = StreamKey{st.rank, traces::kKinetoCpuStreamBase};
    step_thread.push_back(*key);
    points[*key][st.start_s];
    points[*key][st.end_s];
  }

  // Host streams: one op per interval between consecutive points.
  std::vector<std::pair<OpId, int64_t>> pending_deps;  // (op, recorded GPU event whose op it waits for)
  for (auto& [key, pts] : points) {
    const int r = srank.at(key.rank);
    auto name_it = tl.stream_names.find(key);
    const int hs = new_stream(r, schedule::StreamKind::compute,
                                name_it != tl.stream_names.end() ? name_it->second
                                                                 : fmt::format("cpu {}", key.stream));
    double prev = 0;
    for (auto& [t, pt] : pts) {
      if (t <= 0) continue;  // op -1: time 0
      double d = t - prev;
      OpRole role = OpRole::host;
      if (!pt.sync_gpu.empty()) {
        double gend = 0;
        for (int64_t g : pt.sync_gpu) gend = std::max(gend, event(g)->end_s);
        d = std::clamp(t - std::max(prev, gend), 0.0, t - prev);
        role = OpRole::host_sync;
      }
      pt.op = add(compute_op(r, hs, OpKind::elementwise), role, d, -1, prev, t);
      for (int64_t g : pt.sync_gpu) pending_deps.emplace_back(pt.op, g);
      prev = t;
    }
  }

  // GPU streams: each recorded event after the gap it waited out.
  std::unordered_map<int64_t, OpId> op_of_event;
  for (const StreamKey& key : imp.gpu_streams) {
    if (!srank.count(key.rank)) continue;
    const int r = srank.at(key.rank);
    std::vector<const Event*> evs;
    for (const Event* e : tl.on_stream(key.rank, key.stream))
      if (e->op >= 0) evs.push_back(e);
    if (evs.empty()) continue;
    bool has_nccl = false;
    for (const Event* e : evs) has_nccl = has_nccl || imp.collectives.count(e->op);
    auto name_it = tl.stream_names.find(key);
    const int gs = new_stream(r, has_nccl ? schedule::StreamKind::comm_intra : schedule::StreamKind::compute,
                                name_it != tl.stream_names.end() ? name_it->second
                                                                 : fmt::format("stream {}", key.stream));
    double prev_end = 0;
    for (const Event* e : evs) {
      std::vector<OpId> deps;
      std::vector<int64_t> wait_events;
      double bind = prev_end;
      if (auto lp = launch_point.find(e->op); lp != launch_point.end()) {
        const OpId h = points.at(lp->second.first).at(lp->second.second).op;
        if (h >= 0) deps.push_back(h);
        bind = std::max(bind, lp->second.second);
      }
      if (auto w = gpu_waits.find(e->op); w != gpu_waits.end())
        for (int64_t g : w->second) {
          wait_events.push_back(g);
          bind = std::max(bind, event(g)->end_s);
        }
      const double gap = e->start_s - bind;
      if (gap < 0) {
        ++plan.early_starts;
        plan.early_max_s = std::max(plan.early_max_s, -gap);
      }
      auto attach = [&](OpId id) {
        for (OpId d : deps) b.add_dep(id, d);
        for (int64_t g : wait_events) pending_deps.emplace_back(id, g);
        deps.clear();
        wait_events.clear();
      };
      if (gap > 0) attach(add(compute_op(r, gs, OpKind::elementwise), OpRole::gpu_gap, gap, -1, bind, e->start_s));

      OpId main = -1;
      auto ci = call_of.find(e->op);
      if (ci != call_of.end() && calls[ci->second].mode != Call::Mode::fixed) {
        const Call& c = calls[ci->second];
        if (auto w = c.wait_s.find(e->op); w != c.wait_s.end() && w->second > 0)
          attach(add(compute_op(r, gs, OpKind::elementwise), OpRole::nccl_wait, w->second, -1, e->start_s,
                     e->start_s + w->second));
        // p2p: the sender is members[root]; any other recorded kernel is the receiver's.
        const auto it = std::find(c.members.begin(), c.members.end(), e->rank);
        const size_t mi = it != c.members.end() ? static_cast<size_t>(it - c.members.begin())
                                                : static_cast<size_t>(1 - c.root);
        main = add(member_op(c, mi, r, gs), OpRole::collective, -1, e->op,
                   e->start_s + (c.wait_s.count(e->op) ? c.wait_s.at(e->op) : 0.0), e->end_s, c.bytes);
      } else {
        const bool nccl = ci != call_of.end();
        std::string lower = e->name;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
        const bool gemm = !nccl && (lower.find("gemm") != std::string::npos || lower.find("cutlass") != std::string::npos);
        main = add(compute_op(r, gs, gemm ? OpKind::gemm : OpKind::elementwise),
                   nccl ? OpRole::nccl_fixed : OpRole::gpu, std::max(0.0, e->duration_s()), e->op, e->start_s,
                   e->end_s);
      }
      attach(main);
      op_of_event[e->op] = main;
      prev_end = std::max(prev_end, e->end_s);
    }
  }

  // Ghost members: one stream per call, so each is ready from time 0 (their
  // arrival is the recorded members' wait ops).
  for (const Call& c : calls) {
    if (c.mode == Call::Mode::fixed) continue;
    std::set<int> present;
    for (int64_t k : c.kernels) present.insert(event(k)->rank);
    for (size_t mi = 0; mi < c.members.size(); ++mi) {
      const int m = c.members[mi];
      if (present.count(m)) continue;
      const int r = srank.at(m);
      const int gs = new_stream(r, schedule::StreamKind::comm_intra, fmt::format("ghost call {}", c.tag));
      add(member_op(c, mi, r, gs), OpRole::ghost, -1, -1, -1, -1, c.bytes);
    }
  }

  for (const auto& [id, g] : pending_deps) {
    auto it = op_of_event.find(g);
    if (it != op_of_event.end()) b.add_dep(id, it->second);
  }

  // Steps: two points each; a rank without any: its whole trace.
  std::set<int> ranks_with_steps;
  for (size_t i = 0; i < imp.steps.size(); ++i) {
    const traces::KinetoStep& st = imp.steps[i];
    StepPoints sp;
    sp.rank = st.rank;
    sp.name = st.name;
    sp.recorded_start_s = st.start_s;
    sp.recorded_end_s = st.end_s;
    const auto& pts = points.at(step_thread[i]);
    sp.start_op = st.start_s > 0 ? pts.at(st.start_s).op : -1;
    sp.end_op = st.end_s > 0 ? pts.at(st.end_s).op : -1;
    for (const auto& [gpu, lp] : launch_point)
      if (lp.first.rank == st.rank && lp.second >= st.start_s && lp.second < st.end_s && op_of_event.count(gpu))
        sp.gpu_ops.push_back(op_of_event.at(gpu));
    std::sort(sp.gpu_ops.begin(), sp.gpu_ops.end());
    ranks_with_steps.insert(st.rank);
    plan.steps.push_back(std::move(sp));
  }
  for (int r : recorded) {
    if (ranks_with_steps.count(r)) continue;
    StepPoints sp;
    sp.rank = r;
    sp.name = "whole trace";
    sp.whole_trace = true;
    bool first = true;
    for (const Event& e : tl.events) {
      if (e.rank != r) continue;
      sp.recorded_start_s = first ? e.start_s : std::min(sp.recorded_start_s, e.start_s);
      sp.recorded_end_s = first ? e.end_s : std::max(sp.recorded_end_s, e.end_s);
      first = false;
      if (is_gpu(e) && op_of_event.count(e.op)) sp.gpu_ops.push_back(op_of_event.at(e.op));
    }
    std::sort(sp.gpu_ops.begin(), sp.gpu_ops.end());
    plan.notes.push_back(fmt::format("rank {}: no ProfilerStep in the trace: its whole span is reported as one step", r));
    plan.steps.push_back(std::move(sp));
  }
  std::stable_sort(plan.steps.begin(), plan.steps.end(), [](const StepPoints& x, const StepPoints& y) {
    return std::pair(x.rank, x.recorded_start_s) < std::pair(y.rank, y.recorded_start_s);
  });

  plan.schedule = std::move(b).build();

  if (!plan.missing_ranks.empty())
    plan.notes.push_back(fmt::format(
        "ranks {} of the job were not recorded: {} NCCL calls take their side from the recorded kernel durations",
        fmt::join(plan.missing_ranks, ","), plan.calls.missing_members));
  for (const auto& [why, n] : plan.calls.fixed)
    plan.notes.push_back(fmt::format("{} NCCL calls kept at their recorded duration: {}", n, why));
  if (plan.calls.slower_than_recorded > 0)
    plan.notes.push_back(fmt::format("{} NCCL calls cost more alone on the cluster than they took when recorded",
                                     plan.calls.slower_than_recorded));
  if (plan.early_starts > 0)
    plan.notes.push_back(fmt::format("{} GPU events started before what they waited for ended (by up to {:.3f} us): "
                                     "replayed without a gap",
                                     plan.early_starts, plan.early_max_s * 1e6));
  return plan;
}

cost::CostModel replay_cost_model(const Cluster& c) { return cost::CostModel(c, AttentionKernel{}); }

ReplayResult run_replay(const ReplayPlan& plan, const topology::Topology& t, const cost::CostModel& m,
                        engine::EngineKind engine) {
  ReplayResult out;
  const schedule::RunPlan run(plan.schedule);
  out.times = engine == engine::EngineKind::analytic ? engine::run_analytic(plan.schedule, run, t, m, &plan.fixed_s)
                                                     : engine::run_simgrid(plan.schedule, run, t, m, &plan.fixed_s);
  auto at = [&](OpId op) { return op < 0 ? 0.0 : out.times.end[static_cast<size_t>(op)]; };
  std::map<int, size_t> by_rank;
  for (const StepPoints& sp : plan.steps) {
    auto [it, fresh] = by_rank.try_emplace(sp.rank, out.ranks.size());
    if (fresh) out.ranks.push_back(RankResult{sp.rank, {}});
    StepResult r;
    r.name = sp.name;
    r.whole_trace = sp.whole_trace;
    r.recorded_s = sp.recorded_end_s - sp.recorded_start_s;
    if (sp.whole_trace) {
      // The rank's first event cannot move (fixed gaps from 0 lead to it); its
      // last modelled end may, and the CPU time after it is kept as recorded.
      const int sr = static_cast<int>(std::find(plan.global_rank.begin(), plan.global_rank.end(), sp.rank) -
                                      plan.global_rank.begin());
      double rep = sp.recorded_start_s, rec = sp.recorded_start_s;
      for (const Op& op : plan.schedule.ops) {
        const auto i = static_cast<size_t>(op.id);
        if (op.rank != sr || plan.recorded_end[i] < 0) continue;
        rep = std::max(rep, out.times.end[i]);
        rec = std::max(rec, plan.recorded_end[i]);
      }
      r.replayed_s = rep + std::max(0.0, sp.recorded_end_s - rec) - sp.recorded_start_s;
    } else {
      r.replayed_s = at(sp.end_op) - at(sp.start_op);
    }
    if (!sp.gpu_ops.empty()) {
      double rs = 0, re = 0, ps = 0, pe = 0;
      for (size_t k = 0; k < sp.gpu_ops.size(); ++k) {
        const auto i = static_cast<size_t>(sp.gpu_ops[k]);
        const double s0 = out.times.start[i], e0 = out.times.end[i];
        const double s1 = plan.recorded_start[i], e1 = plan.recorded_end[i];
        ps = k == 0 ? s0 : std::min(ps, s0);
        pe = k == 0 ? e0 : std::max(pe, e0);
        rs = k == 0 ? s1 : std::min(rs, s1);
        re = k == 0 ? e1 : std::max(re, e1);
      }
      r.gpu_replayed_s = pe - ps;
      r.gpu_recorded_s = re - rs;
      for (OpId id : sp.gpu_ops) {
        const auto i = static_cast<size_t>(id);
        if (plan.role[i] != OpRole::collective && plan.role[i] != OpRole::nccl_fixed) continue;
        // A kernel's wait on unrecorded members is the op right before it (built so).
        const size_t first = i > 0 && plan.role[i - 1] == OpRole::nccl_wait ? i - 1 : i;
        r.nccl_recorded_s += plan.recorded_end[i] - plan.recorded_start[first];
        r.nccl_replayed_s += out.times.end[i] - out.times.start[first];
      }
    }
    out.ranks[it->second].steps.push_back(std::move(r));
  }
  return out;
}

traces::Timeline replayed_timeline(const traces::KinetoImport& imp, const ReplayPlan& plan, const ReplayResult& res,
                                   traces::Source source) {
  std::unordered_map<int64_t, const Event*> recorded;
  for (const Event& e : imp.timeline.events)
    if (e.op >= 0) recorded.emplace(e.op, &e);
  traces::Timeline tl;
  tl.source = source;
  tl.metadata["replay_of"] = imp.timeline.metadata.value("files", nlohmann::json::array());
  tl.rank_names = imp.timeline.rank_names;
  std::set<int64_t> kept;
  for (size_t i = 0; i < plan.event.size(); ++i) {
    auto it = recorded.find(plan.event[i]);
    if (it == recorded.end()) continue;
    traces::Event e = *it->second;  // name, category, rank, stream, op, bytes as recorded
    const size_t first = i > 0 && plan.role[i - 1] == OpRole::nccl_wait ? i - 1 : i;
    e.start_s = res.times.start[first];
    e.end_s = res.times.end[i];
    e.samples = 0;
    e.spread_s = 0;
    kept.insert(e.op);
    if (auto n = imp.timeline.stream_names.find({e.rank, e.stream}); n != imp.timeline.stream_names.end())
      tl.stream_names[{e.rank, e.stream}] = n->second;
    tl.events.push_back(std::move(e));
  }
  for (const traces::Edge& e : imp.timeline.edges)
    if (kept.count(e.from) && kept.count(e.to)) tl.edges.push_back(e);
  tl.sort();
  return tl;
}

}  // namespace rm::replay
