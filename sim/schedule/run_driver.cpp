#include "sim/schedule/run_driver.hpp"

#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "sim/schedule/schedule_error.hpp"

namespace rm::schedule {

RunPlan::RunPlan(const Schedule& s) : RunPlan(s, match_comms(s)) {}

RunPlan::RunPlan(const Schedule& s, CommMatching m) : match(std::move(m)) {
  const size_t n = s.ops.size();
  stream_of.resize(n);
  run_length.assign(n, 0);
  dep_count.resize(n);
  role.resize(n);
  dependents_begin.assign(n + 1, 0);
  // Streams numbered by first op: a flat (rank, stream) table, and a map for
  // the ops of a Schedule not yet validated that name neither.
  std::vector<size_t> base{0};
  for (const Rank& r : s.ranks) base.push_back(base.back() + r.streams.size());
  std::vector<int32_t> flat(base.back(), -1);
  std::map<std::pair<int, int>, int32_t> odd;
  std::vector<int64_t> count;     // per stream: its ops
  std::vector<OpId> last_head;    // per stream: the head of its current run
  std::vector<OpId> deps;         // every op's deps, in op order (read from the ops once)
  std::vector<OpId> ids;          // ops[j].id, kept only once some op's id is not j (before validation)
  // Pass 1, over the ops: stream, run, role and dependency counts.
  for (const Op& op : s.ops) {
    const auto i = static_cast<size_t>(op.id);
    const size_t j = static_cast<size_t>(&op - s.ops.data());
    if (ids.empty() && i != j) ids.resize(j), std::iota(ids.begin(), ids.end(), OpId{0});
    if (!ids.empty()) ids.push_back(op.id);
    const bool known = s.find_stream(op.rank, op.stream) != nullptr;
    int32_t& k = known ? flat[base[static_cast<size_t>(op.rank)] + static_cast<size_t>(op.stream)]
                       : odd.try_emplace({op.rank, op.stream}, -1).first->second;
    if (k < 0) k = static_cast<int32_t>(count.size()), count.push_back(0), last_head.push_back(-1);
    const auto ks = static_cast<size_t>(k);
    ++count[ks];
    stream_of[i] = k;
    // A run: an op and the joined ops after it (a stream's first op always heads one).
    if (last_head[ks] < 0 || !op.joined) last_head[ks] = op.id;
    ++run_length[static_cast<size_t>(last_head[ks])];
    dep_count[i] = static_cast<int32_t>(op.deps.size());
    role[i] = is_compute(op.kind) ? Role::compute : is_p2p(op.kind) ? Role::p2p : Role::collective;
    for (OpId d : op.deps) ++dependents_begin[static_cast<size_t>(d) + 1], deps.push_back(d);
  }
  // Pass 2, over flat arrays: the streams' ops and the dependents (CSR).
  streams.begin.resize(count.size() + 1);
  for (size_t k = 0; k < count.size(); ++k) streams.begin[k + 1] = streams.begin[k] + count[k];
  streams.ops.resize(n);
  std::vector<int64_t> fill(streams.begin.begin(), streams.begin.end() - 1);
  for (size_t j = 0; j < n; ++j) {
    const OpId id = ids.empty() ? static_cast<OpId>(j) : ids[j];
    streams.ops[static_cast<size_t>(fill[static_cast<size_t>(stream_of[static_cast<size_t>(id)])]++)] = id;
  }
  for (size_t i = 0; i < n; ++i) dependents_begin[i + 1] += dependents_begin[i];
  dependents.resize(static_cast<size_t>(dependents_begin[n]));
  fill.assign(dependents_begin.begin(), dependents_begin.end() - 1);
  size_t at = 0;
  for (size_t j = 0; j < n; ++j) {
    const OpId id = ids.empty() ? static_cast<OpId>(j) : ids[j];
    for (int32_t e = 0; e < dep_count[static_cast<size_t>(id)]; ++e)
      dependents[static_cast<size_t>(fill[static_cast<size_t>(deps[at++])]++)] = id;
  }
}

RunDriver::RunDriver(const RunPlan& plan, RunBackend& backend)
    : p_(plan),
      b_(backend),
      deps_left_(plan.dep_count),
      state_(plan.stream_of.size(), 0),
      head_(plan.streams.size(), 0),
      run_left_(plan.streams.size(), 0),
      arrived_(plan.match.calls.size(), 0) {}

void RunDriver::start() {
  for (size_t k = 0; k < p_.streams.size(); ++k) {
    stack_.push_back({static_cast<int64_t>(k), -1, 0, true});
    drain();
  }
}

void RunDriver::complete(OpId op) {
  // A backend bug would otherwise corrupt the counters silently.
  const bool known = op >= 0 && static_cast<size_t>(op) < state_.size();
  if (!known || !posted(op) || done(op))
    throw std::logic_error(
        fmt::format("run driver: op {} completed {}", op, known && done(op) ? "twice" : "before it was posted"));
  state_[static_cast<size_t>(op)] |= kDone;
  ++done_count_;
  if (draining_) {
    pending_.push_back(op);
    return;
  }
  stack_.push_back({op, p_.dependents_begin[static_cast<size_t>(op)], 0, false});
  drain();
}

// Pending completions go on the stack first-on-top, so each is handled in
// full (with what it releases) before the next, as nested calls would.
void RunDriver::push_pending() {
  for (size_t i = pending_.size(); i-- > 0;)
    stack_.push_back({pending_[i], p_.dependents_begin[static_cast<size_t>(pending_[i])], 0, false});
  pending_.clear();
}

void RunDriver::drain() {
  struct Guard {  // a throwing hook leaves the driver usable for diagnostics
    RunDriver& d;
    ~Guard() { d.draining_ = false, d.stack_.clear(), d.pending_.clear(); }
  } guard{*this};
  draining_ = true;
  while (!stack_.empty()) {
    Frame& f = stack_.back();
    if (!f.launch) {  // complete(op): release its dependents, then its stream
      const auto op = static_cast<size_t>(f.what);
      if (f.cursor < p_.dependents_begin[op + 1]) {
        const auto d = static_cast<size_t>(p_.dependents[static_cast<size_t>(f.cursor++)]);
        if (--deps_left_[d] == 0) stack_.push_back({p_.stream_of[d], -1, 0, true});
        continue;
      }
      stack_.pop_back();
      const auto k = static_cast<size_t>(p_.stream_of[op]);
      if (--run_left_[k] == 0) {
        head_[k] += static_cast<size_t>(p_.run_length[static_cast<size_t>(p_.streams[k][head_[k]])]);
        stack_.push_back({static_cast<int64_t>(k), -1, 0, true});
      }
      continue;
    }
    const auto k = static_cast<size_t>(f.what);
    const auto& ops = p_.streams[k];
    if (f.cursor < 0) {  // launch the stream's next run if it can
      const size_t h = head_[k];
      if (run_left_[k] > 0 || h >= ops.size()) {
        stack_.pop_back();
        continue;
      }
      const size_t e = h + static_cast<size_t>(p_.run_length[static_cast<size_t>(ops[h])]);
      bool ready = true;
      for (size_t i = h; i < e && ready; ++i) ready = deps_left_[static_cast<size_t>(ops[i])] == 0;
      if (!ready) {
        stack_.pop_back();
        continue;
      }
      run_left_[k] = e - h;
      f.cursor = static_cast<int64_t>(h);
      f.end = static_cast<int64_t>(e);
      for (size_t i = h; i < e; ++i) {
        state_[static_cast<size_t>(ops[i])] |= kPosted;
        b_.post(ops[i]);
      }
      push_pending();
      continue;
    }
    if (f.cursor < f.end) {
      const OpId op = ops[static_cast<size_t>(f.cursor++)];
      // Done with the frame once its last op starts: popping it first keeps a
      // chain of zero-time ops from stacking one frame per op.
      if (f.cursor == f.end) stack_.pop_back();
      start_op(op);
      push_pending();
      continue;
    }
    stack_.pop_back();
  }
}

void RunDriver::start_op(OpId op) {
  const auto i = static_cast<size_t>(op);
  switch (p_.role[i]) {
    case RunPlan::Role::compute: b_.start_compute(op); break;
    case RunPlan::Role::p2p: {
      // The transfer starts once: at the first start of a side that finds the other posted.
      const OpId partner = p_.match.partner[i];
      if (partner < 0 || !posted(partner) || (state_[i] & kTransfer)) return;
      state_[i] |= kTransfer;
      state_[static_cast<size_t>(partner)] |= kTransfer;
      b_.start_p2p(op, partner);
      break;
    }
    case RunPlan::Role::collective: {
      const auto c = static_cast<size_t>(p_.match.call_of[i]);
      if (++arrived_[c] == p_.match.calls[c].size()) b_.start_collective(static_cast<int64_t>(c));
    }
  }
}

void RunDriver::check_finished(const Schedule& s) const {
  for (size_t i = 0; i < state_.size(); ++i)
    if (!(state_[i] & kDone))
      throw ScheduleError(fmt::format("{}: never runs (the schedule deadlocks; run schedule::validate for the cause)",
                                      describe(s, static_cast<OpId>(i))));
}

}  // namespace rm::schedule
