#include "sim/engine/stream_run.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "sim/engine/analytic_parts.hpp"
#include "sim/engine/exec_plan.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/engine/path_nodes.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/schedule/call_shape.hpp"
#include "sim/schedule/p2p_matcher.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::engine {

using namespace analytic_parts;  // NOLINT: the engine's own parts
using schedule::Op;
using schedule::OpId;
using schedule::OpKind;

namespace {

enum : uint8_t { kPosted = 1, kDone = 2, kTransfer = 4, kBytes = 8 /* p2p: its pair's transfer carries bytes */ };

// The ops of one chunk and what the run keeps per op (flat arrays, by index in the chunk).
struct Chunk {
  OpId base = 0;
  std::vector<Op> ops;
  std::vector<schedule::OpDesc> descs;  // the entries its ops name
  std::vector<double> compute_s, start, end;
  std::vector<int32_t> deps_left;
  std::vector<int32_t> run_length;  // ops in the run the op heads (0: not a head)
  std::vector<int32_t> stream;      // index into StreamRun::Impl::streams_
  std::vector<int64_t> link;        // p2p: the matched op (-1: not yet); collective: its call
  std::vector<int32_t> route;       // p2p: the pair's route (set once matched)
  std::vector<int32_t> first_dependent, last_dependent;  // per op: its list in `edges` (-1: none)
  std::vector<uint8_t> state;
  // Read at every launch and end: kept here, dense, so that the run does not
  // go back to the Op record (a cache miss each time on large rings).
  std::vector<uint8_t> kind, phase;
  std::vector<int32_t> src_rank, dst_rank;  // p2p: its pair's sender and receiver (-1: not p2p)
  std::vector<uint32_t> dep_begin;  // op i's dependencies: dep_ids[dep_begin[i], dep_begin[i + 1])
  std::vector<OpId> dep_ids;
  std::span<const OpId> deps(size_t i) const {
    return {dep_ids.data() + dep_begin[i], dep_ids.data() + dep_begin[i + 1]};
  }
  // The critical path (path_nodes.hpp): per op its node once ended, what its
  // start waited for last (set at its launch, then over its partners at its
  // transfer's start) and whose wait that was (-1: its own).
  std::vector<PathNodes::Ref> node, choice;
  std::vector<OpId> via;
  std::vector<uint8_t> via_kind, via_phase;
  // Dependents of this chunk's ops, each list in id order (as RunPlan's CSR).
  struct Edge {
    OpId dependent;
    int32_t next;
  };
  std::vector<Edge> edges;
  int64_t done = 0;
  double min_start = 1e300;  // the earliest start among its ops posted so far
  size_t size() const { return end.size(); }  // its ops go to the sink when it retires, its ends stay
};

// A stream: its ops not yet ended, in id order (the front heads the next run to end).
struct StreamQueue {
  std::deque<OpId> ops;
  std::vector<OpId> prev_run;  // the ops of the last run that ended: what the next run waited for
  size_t run_left = 0;  // ops of the launched run not yet ended (0: none launched)
  OpId last_head = -1;  // the head of the stream's last run (RunPlan's run grouping)
};

// A collective call: the k-th op of each member on (group, tag), in member order.
struct Call {
  std::vector<OpId> members;  // -1 until that member's op arrives
  size_t filled = 0, arrived = 0;
  OpId max_id = -1;
  CallRun run;
  std::vector<int32_t>* route_ids = nullptr;  // its call_routes_ entry
};

// Calls of one (group, tag) still being formed: call k is calls[k - k_lo].
struct OpenCalls {
  std::vector<int64_t> next_k;  // per member: the call its next op joins
  int64_t k_lo = 0;
  std::deque<int64_t> calls;
};

}  // namespace

struct StreamRun::Impl : EventCore<StreamRun::Impl> {
  Impl(const topology::Topology& t, const cost::CostModel& m, RetireSink sink)
      : EventCore(t, m, capacities(t, m)), sink_(std::move(sink)) {}

  void append(ReadyChunk ready, bool last);
  Stats stats_;
  ChunkPreparer preparer_{m_};  // for chunks handed over with their Schedule

 private:
  // --- where an op is
  struct Loc {
    Chunk* c;
    size_t i;
  };
  // Every event looks ops up, mostly in the chunk it looked at last or the one
  // before (a dependent and its stream's head), so those two are tried first, inline.
  Loc loc(OpId id) {
    if (Chunk* c = cached_; c && uint64_t(id - c->base) < c->size()) return {c, size_t(id - c->base)};
    return loc_slow(id);
  }
  Loc loc_slow(OpId id) {
    if (Chunk* c = cached2_; c && uint64_t(id - c->base) < c->size()) {
      std::swap(cached_, cached2_);
      return {c, size_t(id - c->base)};
    }
    auto it = std::upper_bound(chunks_.begin(), chunks_.end(), id, [](OpId v, const Chunk& c) { return v < c.base; });
    if (it == chunks_.begin()) throw std::logic_error(fmt::format("stream run: op {} is no longer held", id));
    Chunk& c = *(it - 1);
    cached2_ = cached_;
    cached_ = &c;
    return {&c, size_t(id - c.base)};
  }
  void forget_cached() { cached_ = cached2_ = nullptr; }
  bool retired(OpId id) const { return id < retired_below_; }
  bool done(OpId id) { return retired(id) || (at_state(id) & kDone); }
  bool posted(OpId id) { return retired(id) || (at_state(id) & kPosted); }
  uint8_t& at_state(OpId id) {
    Loc l = loc(id);
    return l.c->state[l.i];
  }
  const Op& op(OpId id) {
    Loc l = loc(id);
    return l.c->ops[l.i];
  }
  int64_t bytes_of(OpId id) {
    Loc l = loc(id);
    return schedule::desc_in(l.c->descs, l.c->ops[l.i]).bytes;
  }

  // --- arrival
  void sync_frame(ReadyChunk& ready);
  void add_op(Chunk& c, size_t i);
  int32_t stream_index(int rank, int stream);
  void match_p2p(Chunk& c, size_t i);
  void join_call(Chunk& c, size_t i);
  [[noreturn]] void not_exact(const Op& o, const std::string& why) const;
  std::string describe(const Op& o) const;

  // --- the run driver's semantics (schedule/run_driver.hpp), over the chunks
  struct Frame {
    int64_t what;    // op or stream
    int64_t cursor;  // complete: next edge (-1: none left); launch: next op of the run (-1: not yet launched)
    int64_t end;     // launch: one past the run's last op (positions in the stream's queue)
    bool launch;
    Chunk* chunk;    // complete: the op's chunk (its edges)
  };
  void start_driver();
  void complete(OpId id);
  void drain();
  void start_op(OpId id);
  Frame complete_frame(OpId id) {
    Loc l = loc(id);
    return {id, l.c->first_dependent[l.i], 0, false, l.c};
  }

  // --- the analytic backend (EventCore, shared with analytic.cpp's Sim)
  friend EventCore<Impl>;
  void run(bool to_end);
  bool ends_newest(Next next) const;
  void post(Loc l) {
    l.c->state[l.i] |= kPosted;
    l.c->start[l.i] = now_;
    l.c->min_start = std::min(l.c->min_start, now_);
  }
  void start_compute(OpId id) {
    Loc l = loc(id);
    push(now_ + l.c->compute_s[l.i], Ev::op_done, id);
  }
  void start_p2p(OpId id, OpId partner);
  void start_collective(int64_t call);
  void start_xfer(Call& call, int64_t id, int32_t local);
  void xfer_done(int64_t x);
  void op_done(OpId id) {
    Loc l = loc(id);
    l.c->end[l.i] = now_;
    trace_end(l);
    complete(id);
  }
  void retire();

  // --- the critical path (path_nodes.hpp), chosen as report::critical_chain would
  struct Wait {
    double end;
    PathNodes::Ref node;
  };
  std::optional<Wait> ended(OpId id);  // an ended op still in reach, else nullopt (it ended before now_)
  void trace_launch(const StreamQueue& q, size_t len);
  void trace_partners(std::span<const OpId> members);
  void trace_end(Loc l);
  void release_graveyard();

 public:
  std::optional<std::vector<schedule::PathLink>> critical_chain(std::vector<schedule::PathTransfer>* transfers) const;

 private:

  RetireSink sink_;

  // The Schedule's frame, copied from the first chunk's meta (groups as they come).
  bool started_ = false;
  std::vector<int> gpu_of_rank_;
  std::vector<std::vector<int32_t>> stream_ids_;  // per rank, per stream id: index into streams_ (-1: none yet)
  std::vector<schedule::Group> groups_;
  std::unordered_map<uint64_t, int> member_of_;  // (group << 32 | rank) -> index in the group
  int replicas_ = 1;

  std::deque<Chunk> chunks_;
  Chunk* cached_ = nullptr;   // loc()'s last chunk
  Chunk* cached2_ = nullptr;  // and the one before it
  OpId next_id_ = 0, retired_below_ = 0, newest_base_ = 0;
  int64_t ops_held_ = 0;  // in chunks_
  std::vector<StreamQueue> streams_;
  schedule::P2PMatcher<OpId> unmatched_;  // sends and recvs waiting for their partner
  std::map<std::pair<int, int64_t>, OpenCalls> open_calls_;
  std::unordered_map<int64_t, Call> calls_;
  int64_t call_count_ = 0;

  std::vector<Frame> stack_;
  bool draining_ = false;

  PathNodes path_;
  std::vector<PathNodes::Ref> own_scratch_;  // trace_partners' per-member choices
  // Chunks retired at the current time: an op launched now may still have
  // waited for one of their ops, which ended now too (the ops of chunks
  // retired earlier ended earlier, and lose to the wait that ended now).
  std::deque<Chunk> graveyard_;
  double graveyard_time_ = 0;
  PathNodes::Ref last_ = -1;  // the op that ends last, the lowest id on ties
  OpId last_id_ = -1;
  double last_end_ = 0;

  CallShapes shapes_;
  std::map<std::pair<int, const CallShape*>, std::vector<int32_t>> call_routes_;
};

// ---------------------------------------------------------------- arrival

ReadyChunk ChunkPreparer::prepare(const schedule::Schedule& meta, schedule::OpChunk chunk) {
  std::vector<Op>& ops = chunk.ops;
  ReadyChunk r;
  if (first_) {
    for (const auto& rank : meta.ranks) r.rank_gpu.push_back(rank.gpu), r.rank_streams.push_back(int(rank.streams.size()));
    r.symmetry = meta.symmetry;
    ranks_ = meta.ranks.size();
    first_ = false;
  } else if (meta.ranks.size() != ranks_) {
    throw std::invalid_argument("StreamRun: the Schedule's ranks changed between chunks");
  }
  r.new_groups.assign(meta.groups.begin() + std::ptrdiff_t(std::min(groups_, meta.groups.size())), meta.groups.end());
  groups_ = std::max(groups_, meta.groups.size());
  r.compute_s.assign(ops.size(), 0.0);
  for (size_t i = 0; i < ops.size(); ++i)
    if (schedule::is_compute(ops[i].kind))
      r.compute_s[i] = m_.compute_seconds(meta, ops[i], schedule::desc_in(chunk.descs, ops[i]));
  r.ops = std::move(ops);
  r.descs = std::move(chunk.descs);
  return r;
}

void StreamRun::Impl::sync_frame(ReadyChunk& ready) {
  if (!started_ && gpu_of_rank_.empty()) {
    for (size_t k = 0; k < ready.rank_gpu.size(); ++k) {
      gpu_of_rank_.push_back(ready.rank_gpu[k]);
      stream_ids_.emplace_back(size_t(ready.rank_streams[k]), -1);
    }
    replicas_ = ready.symmetry.replicas;
    if (replicas_ > 1) sym_ = std::make_unique<ReplicaRoutes>(t_, m_, ready.symmetry);
  }
  for (auto& group : ready.new_groups) {
    const size_t g = groups_.size();
    groups_.push_back(std::move(group));
    const auto& ranks = groups_.back().ranks;
    for (size_t k = 0; k < ranks.size(); ++k) member_of_[uint64_t(g) << 32 | uint32_t(ranks[k])] = int(k);
  }
}

std::string StreamRun::Impl::describe(const Op& o) const {
  return fmt::format("op {} (rank {} stream {}, {} {} layer {} step {})", o.id, o.rank, o.stream, schedule::to_string(o.kind),
                     schedule::to_string(o.phase), o.layer, o.step);
}

void StreamRun::Impl::not_exact(const Op& o, const std::string& why) const {
  throw StreamNotExact(fmt::format("streaming is not exact for this Schedule: {} {}; simulate it whole", describe(o), why));
}

int32_t StreamRun::Impl::stream_index(int rank, int stream) {
  if (rank < 0 || size_t(rank) >= stream_ids_.size() || stream < 0 || size_t(stream) >= stream_ids_[size_t(rank)].size())
    throw std::invalid_argument(fmt::format("StreamRun: no stream {} on rank {}", stream, rank));
  int32_t& k = stream_ids_[size_t(rank)][size_t(stream)];
  if (k < 0) k = int32_t(streams_.size()), streams_.emplace_back();
  return k;
}

void StreamRun::Impl::add_op(Chunk& c, size_t i) {
  const Op& o = c.ops[i];
  const OpId id = o.id;
  // Dependencies: only those not yet ended count (an ended one has released nothing yet to this op).
  int32_t left = 0;
  for (OpId d : o.deps) {
    if (d < 0 || d >= id) throw std::invalid_argument(fmt::format("StreamRun: {} depends on op {}", describe(o), d));
    if (done(d)) continue;
    ++left;
    Loc l = loc(d);
    const int32_t e = int32_t(l.c->edges.size());
    l.c->edges.push_back({id, -1});
    if (l.c->last_dependent[l.i] < 0) l.c->first_dependent[l.i] = e;
    else l.c->edges[size_t(l.c->last_dependent[l.i])].next = e;
    l.c->last_dependent[l.i] = e;
  }
  c.deps_left[i] = left;
  // Stream and run.
  const int32_t k = stream_index(o.rank, o.stream);
  c.stream[i] = k;
  StreamQueue& q = streams_[size_t(k)];
  const bool stream_busy = !q.ops.empty();
  if (q.last_head < 0 || !o.joined) {
    q.last_head = id;
    c.run_length[i] = 1;
  } else {
    if (posted(q.last_head)) not_exact(o, fmt::format("joins the run of op {}, which had already launched", q.last_head));
    Loc h = loc(q.last_head);
    ++h.c->run_length[h.i];
  }
  q.ops.push_back(id);
  // Cost and matching.
  if (schedule::is_p2p(o.kind)) match_p2p(c, i);
  else if (!schedule::is_compute(o.kind)) join_call(c, i);
  // Exactness: something not yet ended must hold the op back, so that what
  // launches it is an event still to come (as in the whole run).
  if (started_ && left == 0 && !stream_busy)
    not_exact(o, "had every dependency and its stream's earlier ops ended before it was generated");
}

void StreamRun::Impl::match_p2p(Chunk& c, size_t i) {
  const Op& o = c.ops[i];
  const bool send = o.kind == OpKind::send;
  const auto matched = unmatched_.add(send ? std::tuple{o.rank, o.peer, o.tag} : std::tuple{o.peer, o.rank, o.tag}, !send, o.id);
  if (!matched) return;
  const OpId partner = *matched;
  if (o.peer < 0 || size_t(o.peer) >= gpu_of_rank_.size())
    throw std::invalid_argument(fmt::format("StreamRun: {} has no peer", describe(o)));
  const int src = gpu_of_rank_[size_t(send ? o.rank : o.peer)], dst = gpu_of_rank_[size_t(send ? o.peer : o.rank)];
  const int32_t r = route(src, dst);
  c.link[i] = partner;
  c.route[i] = r;
  Loc p = loc(partner);
  p.c->link[p.i] = o.id;
  p.c->route[p.i] = r;
}

void StreamRun::Impl::join_call(Chunk& c, size_t i) {
  const Op& o = c.ops[i];
  if (o.group < 0 || size_t(o.group) >= groups_.size())
    throw std::invalid_argument(fmt::format("StreamRun: {} names no group", describe(o)));
  const auto mit = member_of_.find(uint64_t(o.group) << 32 | uint32_t(o.rank));
  if (mit == member_of_.end()) throw std::invalid_argument(fmt::format("StreamRun: {} is not in its group", describe(o)));
  const size_t n = groups_[size_t(o.group)].ranks.size();
  OpenCalls& oc = open_calls_[{o.group, o.tag}];
  if (oc.next_k.empty()) oc.next_k.assign(n, 0);
  const int64_t k = oc.next_k[size_t(mit->second)]++;
  while (k - oc.k_lo >= int64_t(oc.calls.size())) {
    const int64_t id = call_count_++;
    Call& call = calls_[id];
    call.members.assign(n, -1);
    oc.calls.push_back(id);
  }
  const int64_t cid = oc.calls[size_t(k - oc.k_lo)];
  Call& call = calls_.at(cid);
  call.members[size_t(mit->second)] = o.id;
  call.max_id = std::max(call.max_id, OpId(o.id));
  ++call.filled;
  c.link[i] = cid;
  while (!oc.calls.empty() && calls_.at(oc.calls.front()).filled == n) oc.calls.pop_front(), ++oc.k_lo;
}

void StreamRun::Impl::append(ReadyChunk ready, bool last) {
  sync_frame(ready);
  if (ready.compute_s.size() != ready.ops.size())
    throw std::invalid_argument("StreamRun: a ready chunk without each op's compute seconds");
  if (!ready.ops.empty()) {
    Chunk& c = chunks_.emplace_back();
    c.base = next_id_;
    c.ops = std::move(ready.ops);
    c.descs = std::move(ready.descs);
    const size_t n = c.ops.size();
    c.compute_s = std::move(ready.compute_s);
    c.start.assign(n, -1.0);
    c.end.assign(n, -1.0);
    c.deps_left.assign(n, 0);
    c.run_length.assign(n, 0);
    c.stream.assign(n, -1);
    c.link.assign(n, -1);
    c.route.assign(n, -1);
    c.first_dependent.assign(n, -1);
    c.last_dependent.assign(n, -1);
    c.state.assign(n, 0);
    c.node.assign(n, -1);
    c.choice.assign(n, -1);
    c.via.assign(n, -1);
    c.via_kind.assign(n, 0);
    c.via_phase.assign(n, 0);
    c.kind.resize(n);
    c.phase.resize(n);
    c.src_rank.assign(n, -1);
    c.dst_rank.assign(n, -1);
    c.dep_begin.resize(n + 1);
    size_t deps = 0;
    for (size_t i = 0; i < n; ++i) {
      const Op& o = c.ops[i];
      c.kind[i] = uint8_t(o.kind), c.phase[i] = uint8_t(o.phase);
      if (o.kind == OpKind::send) c.src_rank[i] = o.rank, c.dst_rank[i] = o.peer;
      if (o.kind == OpKind::recv) c.src_rank[i] = o.peer, c.dst_rank[i] = o.rank;
      c.dep_begin[i] = uint32_t(deps);
      deps += c.ops[i].deps.size();
    }
    c.dep_begin[n] = uint32_t(deps);
    c.dep_ids.reserve(deps);
    for (const Op& o : c.ops) c.dep_ids.insert(c.dep_ids.end(), o.deps.begin(), o.deps.end());
    for (size_t i = 0; i < n; ++i)
      if (c.ops[i].id != c.base + OpId(i))
        throw std::invalid_argument(fmt::format("StreamRun: op {} arrived where op {} was due", c.ops[i].id, c.base + OpId(i)));
    next_id_ = c.base + OpId(n);
    newest_base_ = c.base;
    forget_cached();
    for (size_t i = 0; i < n; ++i) add_op(c, i);
    ++stats_.chunks;
    stats_.ops += int64_t(n);
    ops_held_ += int64_t(n);
    stats_.peak_ops_held = std::max(stats_.peak_ops_held, ops_held_);
  }
  if (!started_) {
    started_ = true;
    start_driver();
  }
  run(last);
  if (!last) return;
  retire();
  if (!chunks_.empty()) {
    const Chunk& c = chunks_.front();
    for (size_t i = 0; i < c.size(); ++i)
      if (!(c.state[i] & kDone))
        throw schedule::ScheduleError(fmt::format("{}: never runs (the schedule deadlocks)", describe(c.ops[i])));
  }
}

// ---------------------------------------------------------------- the driver

void StreamRun::Impl::start_driver() {
  for (size_t k = 0; k < streams_.size(); ++k) {
    stack_.push_back({int64_t(k), -1, 0, true, nullptr});
    drain();
  }
}

void StreamRun::Impl::complete(OpId id) {
  uint8_t& st = at_state(id);
  if (!(st & kPosted) || (st & kDone))
    throw std::logic_error(fmt::format("stream run: op {} completed {}", id, (st & kDone) ? "twice" : "before it was posted"));
  // The analytic backend ends ops from its events only, never inside a start hook.
  if (draining_) throw std::logic_error(fmt::format("stream run: op {} completed inside a start hook", id));
  st |= kDone;
  ++loc(id).c->done;
  stack_.push_back(complete_frame(id));
  drain();
}

void StreamRun::Impl::drain() {
  struct Guard {
    Impl& d;
    ~Guard() { d.draining_ = false, d.stack_.clear(); }
  } guard{*this};
  draining_ = true;
  while (!stack_.empty()) {
    Frame& f = stack_.back();
    if (!f.launch) {  // complete(op): release its dependents, then its stream
      if (f.cursor >= 0) {
        const Chunk::Edge e = f.chunk->edges[size_t(f.cursor)];
        f.cursor = e.next;
        Loc d = loc(e.dependent);
        if (--d.c->deps_left[d.i] == 0) stack_.push_back({d.c->stream[d.i], -1, 0, true, nullptr});
        continue;
      }
      const OpId id = f.what;
      stack_.pop_back();
      Loc l = loc(id);
      const auto k = size_t(l.c->stream[l.i]);
      StreamQueue& q = streams_[k];
      if (--q.run_left == 0) {
        const OpId head = q.ops.front();
        Loc h = loc(head);
        const auto len = size_t(h.c->run_length[h.i]);
        q.prev_run.assign(q.ops.begin(), q.ops.begin() + std::ptrdiff_t(len));
        q.ops.erase(q.ops.begin(), q.ops.begin() + std::ptrdiff_t(len));
        stack_.push_back({int64_t(k), -1, 0, true, nullptr});
      }
      continue;
    }
    const auto k = size_t(f.what);
    StreamQueue& q = streams_[k];
    if (f.cursor < 0) {  // launch the stream's next run if it can
      if (q.run_left > 0 || q.ops.empty()) {
        stack_.pop_back();
        continue;
      }
      Loc h = loc(q.ops.front());
      const auto len = size_t(h.c->run_length[h.i]);
      if (q.ops.size() < len) throw std::logic_error("stream run: a run longer than its stream");
      bool ready = true;
      for (size_t i = 0; i < len && ready; ++i) {
        Loc o = loc(q.ops[i]);
        ready = o.c->deps_left[o.i] == 0;
      }
      if (!ready) {
        stack_.pop_back();
        continue;
      }
      q.run_left = len;
      f.cursor = 0;
      f.end = int64_t(len);
      for (size_t i = 0; i < len; ++i) post(loc(q.ops[i]));
      trace_launch(q, len);
      continue;
    }
    if (f.cursor < f.end) {
      const OpId id = q.ops[size_t(f.cursor++)];
      if (f.cursor == f.end) stack_.pop_back();
      start_op(id);
      continue;
    }
    stack_.pop_back();
  }
}

void StreamRun::Impl::start_op(OpId id) {
  Loc l = loc(id);
  const auto kind = OpKind(l.c->kind[l.i]);
  if (schedule::is_compute(kind)) {
    start_compute(id);
  } else if (schedule::is_p2p(kind)) {
    const OpId partner = l.c->link[l.i];
    if (partner < 0 || !posted(partner) || (l.c->state[l.i] & kTransfer)) return;
    l.c->state[l.i] |= kTransfer;
    at_state(partner) |= kTransfer;
    start_p2p(id, partner);
  } else {
    const int64_t c = l.c->link[l.i];
    Call& call = calls_.at(c);
    if (++call.arrived == call.members.size()) start_collective(c);
  }
}

// ---------------------------------------------------------------- the backend

// Whether the next to handle (next() says from where) would end an op of the newest
// chunk: the run stops there until the next chunk has arrived.
bool StreamRun::Impl::ends_newest(Next next) const {
  auto of_call = [&](int64_t x) { return calls_.at(xfer_call(x)).max_id >= newest_base_; };
  if (next == Next::activation) return false;  // a transfer's bytes start to flow: nothing ends
  if (next == Next::flow) {
    const Owner& o = owners_[size_t(ends_.top())];
    return o.b >= 0 ? std::max(o.a, o.b) >= newest_base_ : of_call(o.a);
  }
  const Event& e = queue_.top();
  switch (e.kind) {
    case Ev::op_done: return e.a >= newest_base_;
    case Ev::p2p_done: return std::max(e.a, e.b) >= newest_base_;
    case Ev::xfer_done: return of_call(e.a);
  }
  return false;
}

void StreamRun::Impl::run(bool to_end) {
  while (pending()) {
    const Next next = this->next();
    if (!to_end && ends_newest(next)) return;
    step(next);
    retire();
    if (!graveyard_.empty() && graveyard_time_ < now_) release_graveyard();
  }
}

void StreamRun::Impl::retire() {
  while (!chunks_.empty() && chunks_.front().done == int64_t(chunks_.front().size())) {
    Chunk& c = chunks_.front();
    // Ops not yet posted start at now_ or later.
    double safe = now_;
    for (size_t k = 1; k < chunks_.size(); ++k) safe = std::min(safe, chunks_[k].min_start);
    retired_below_ = c.base + OpId(c.size());
    // The ops and starts are handed over; the ends stay for waits that ended now (the graveyard).
    sink_(RetiredChunk{std::move(c.ops), std::move(c.descs), std::move(c.start), c.end, safe, groups_});
    ops_held_ -= int64_t(c.size());
    if (cached_ == &c || cached2_ == &c) forget_cached();
    if (!graveyard_.empty() && graveyard_time_ < now_) release_graveyard();
    graveyard_time_ = now_;
    graveyard_.push_back(std::move(c));
    chunks_.pop_front();
  }
}

void StreamRun::Impl::start_p2p(OpId id, OpId partner) {
  Loc l = loc(id);
  const Op& o = l.c->ops[l.i];
  const double bytes = double(o.kind == OpKind::send ? schedule::desc_in(l.c->descs, o).bytes : bytes_of(partner));
  if (bytes > 0) l.c->state[l.i] |= kBytes, at_state(partner) |= kBytes;
  const OpId pair[2] = {std::min(id, partner), std::max(id, partner)};
  trace_partners(pair);
  start_transfer(l.c->route[l.i], bytes, {id, partner});
}

void StreamRun::Impl::start_collective(int64_t c) {
  Call& call = calls_.at(c);
  const Op& first = op(call.members.front());
  begin_call(schedule::call_shape_key(first, bytes_of(call.members.front()), groups_[size_t(first.group)], replicas_,
                                      int(call.members.size())),
             call.run, shapes_);
  auto& ids = call_routes_[{first.group, call.run.shape.get()}];
  if (ids.empty()) ids.assign(call.run.plan().size(), -1);
  call.route_ids = &ids;
  trace_partners(call.members);
  for (size_t i = 0; i < call.members.size(); ++i)
    if (call.run.member_left[i] == 0) push(now_, Ev::op_done, call.members[i]);
  for (size_t i = 0; i < call.run.plan().size(); ++i)
    if (call.run.deps_left[i] == 0) start_xfer(call, c, int32_t(i));
  if (call.run.plan().empty()) calls_.erase(c);
}

void StreamRun::Impl::start_xfer(Call& call, int64_t id, int32_t local) {
  const auto& pt = call.run.plan()[size_t(local)];
  int32_t& r = (*call.route_ids)[size_t(local)];
  if (r < 0) {
    auto gpu = [&](int m) {
      const int g = gpu_of_rank_[size_t(op(call.members[size_t(call.run.slot(m))]).rank)];
      return call.run.fold > 0 ? sym_->translate(g, m / call.run.fold) : g;
    };
    r = route(gpu(pt.src), gpu(pt.dst));
  }
  start_transfer(r, pt.bytes, {xfer_id(id, local), -1});
}

void StreamRun::Impl::xfer_done(int64_t x) {
  const int64_t c = xfer_call(x);
  const int32_t local = xfer_local(x);
  Call& call = calls_.at(c);  // unordered_map: references stay valid while others come and go
  const auto& pt = call.run.plan()[size_t(local)];
  for (int m : {call.run.slot(pt.src), call.run.slot(pt.dst)})
    if (--call.run.member_left[size_t(m)] == 0) op_done(call.members[size_t(m)]);
  call.run.release_dependents(local, [&](int32_t d) { start_xfer(call, c, d); });
  call.run.end_xfer();
  if (call.run.xfers_left == 0) calls_.erase(c);
}

// ---------------------------------------------------------------- the critical path

std::optional<StreamRun::Impl::Wait> StreamRun::Impl::ended(OpId id) {
  if (!retired(id)) {
    Loc l = loc(id);
    if (!(l.c->state[l.i] & kDone)) throw std::logic_error(fmt::format("stream run: a run launched before op {}, which it waits for, ended", id));
    return Wait{l.c->end[l.i], l.c->node[l.i]};
  }
  for (auto g = graveyard_.rbegin(); g != graveyard_.rend(); ++g)
    if (id >= g->base && id < g->base + OpId(g->size())) {
      const auto i = size_t(id - g->base);
      return Wait{g->end[i], g->node[i]};
    }
  return std::nullopt;
}

// A run launches when the last of its waits ends (now_): its dependencies, the
// deps of the ops joined with it, and the ops of its stream's previous run, in
// timeline_edges' order; the first that ended last is what each op waited for.
void StreamRun::Impl::trace_launch(const StreamQueue& q, size_t len) {
  std::optional<Wait> best;
  auto consider = [&](OpId w) {
    const auto x = ended(w);
    if (x && (!best || x->end > best->end)) best = x;
  };
  for (size_t i = 0; i < len; ++i) {
    Loc l = loc(q.ops[i]);
    for (OpId d : l.c->deps(l.i)) consider(d);
  }
  for (OpId p : q.prev_run) consider(p);
  for (size_t i = 0; i < len; ++i) {
    Loc l = loc(q.ops[i]);
    l.c->choice[l.i] = best ? best->node : -1;
    if (best) path_.ref(best->node);
  }
}

// A transfer starts once its partners are all posted: each takes its own wait
// unless a partner's ended later (the first such member on ties), as the
// walk that considers an op's waits, then its partners' in member order, does.
void StreamRun::Impl::trace_partners(std::span<const OpId> members) {
  int first = -1;
  double latest = 0;
  std::vector<PathNodes::Ref>& own = own_scratch_;  // reused: this runs at every transfer's start
  own.assign(members.size(), -1);
  for (size_t k = 0; k < members.size(); ++k) {
    Loc l = loc(members[k]);
    own[k] = l.c->choice[l.i];
    if (own[k] >= 0 && (first < 0 || path_.end(own[k]) > latest)) first = int(k), latest = path_.end(own[k]);
  }
  if (first < 0) return;
  const Loc via = loc(members[size_t(first)]);
  for (size_t k = 0; k < members.size(); ++k) {
    if (own[k] >= 0 && path_.end(own[k]) == latest) continue;
    Loc l = loc(members[k]);
    path_.ref(own[size_t(first)]);
    path_.unref(own[k]);
    l.c->choice[l.i] = own[size_t(first)];
    l.c->via[l.i] = members[size_t(first)];
    l.c->via_kind[l.i] = via.c->kind[via.i];
    l.c->via_phase[l.i] = via.c->phase[via.i];
  }
}

void StreamRun::Impl::trace_end(Loc l) {
  const OpId id = l.c->base + OpId(l.i);
  const auto kind = OpKind(l.c->kind[l.i]);
  schedule::PathLink link;
  link.op = id, link.start = l.c->start[l.i], link.end = now_, link.kind = kind, link.phase = schedule::Phase(l.c->phase[l.i]);
  if (l.c->via[l.i] >= 0) {
    link.via = l.c->via[l.i];
    link.via_kind = OpKind(l.c->via_kind[l.i]), link.via_phase = schedule::Phase(l.c->via_phase[l.i]);
  }
  const int64_t call = schedule::is_compute(kind) ? PathNodes::kNoCall
                       : schedule::is_p2p(kind)   ? std::min(id, l.c->link[l.i])
                                                    : -(l.c->link[l.i] + 1);
  schedule::PathTransfer xfer;
  if (schedule::is_p2p(kind) && (l.c->state[l.i] & kBytes)) {
    // Both ends of a pair end at this time (p2p_done); the transfer began when the later was posted.
    const Loc p = loc(l.c->link[l.i]);
    xfer = {std::max(l.c->start[l.i], p.c->start[p.i]), l.c->src_rank[l.i], l.c->dst_rank[l.i]};
  }
  const PathNodes::Ref r = path_.make(link, call, std::exchange(l.c->choice[l.i], -1), xfer);
  l.c->node[l.i] = r;
  if (last_ < 0 || now_ > last_end_ || id < last_id_) {
    path_.ref(r);
    path_.unref(last_);
    last_ = r, last_id_ = id, last_end_ = now_;
  }
  stats_.peak_path_nodes = std::max(stats_.peak_path_nodes, path_.live());
}

void StreamRun::Impl::release_graveyard() {
  for (const Chunk& c : graveyard_)
    for (PathNodes::Ref r : c.node) path_.unref(r);
  graveyard_.clear();
}

std::optional<std::vector<schedule::PathLink>> StreamRun::Impl::critical_chain(
    std::vector<schedule::PathTransfer>* transfers) const {
  return path_.chain(last_, transfers);
}

// ---------------------------------------------------------------- StreamRun

StreamRun::StreamRun(const topology::Topology& t, const cost::CostModel& m, RetireSink sink)
    : impl_(std::make_unique<Impl>(t, m, std::move(sink))) {}
StreamRun::~StreamRun() = default;
void StreamRun::append(const schedule::Schedule& meta, std::vector<Op> ops, bool last) {
  impl_->append(impl_->preparer_.prepare(meta, schedule::own_descs(std::move(ops), meta.descs)), last);
}
void StreamRun::append(ReadyChunk chunk, bool last) {
  impl_->append(std::move(chunk), last);
}
const StreamRun::Stats& StreamRun::stats() const { return impl_->stats_; }
std::optional<std::vector<schedule::PathLink>> StreamRun::critical_chain(
    std::vector<schedule::PathTransfer>* transfers) const {
  return impl_->critical_chain(transfers);
}

}  // namespace rm::engine
