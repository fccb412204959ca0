#include "sim/engine/exec_plan.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/schedule/schedule_error.hpp"

namespace rm::engine {

using schedule::Op;
using schedule::OpId;

ExecPlan make_exec_plan(const schedule::Schedule& s, const cost::CostModel& m) {
  ExecPlan p;
  const size_t n = s.ops.size();
  p.match = schedule::match_comms(s);
  p.stream_of.resize(n);
  p.run_length.assign(n, 0);
  p.compute_s.assign(n, 0.0);
  p.member_of.assign(n, -1);
  std::map<std::pair<int, int>, int32_t> index;
  for (const Op& op : s.ops) {
    auto [it, fresh] = index.try_emplace({op.rank, op.stream}, static_cast<int32_t>(p.streams.size()));
    if (fresh) p.streams.emplace_back();
    p.streams[static_cast<size_t>(it->second)].push_back(op.id);
    p.stream_of[static_cast<size_t>(op.id)] = it->second;
    if (schedule::is_compute(op.kind)) p.compute_s[static_cast<size_t>(op.id)] = m.compute_seconds(op);
  }
  for (const auto& ops : p.streams) {
    size_t head = 0;
    for (size_t i = 1; i <= ops.size(); ++i)
      if (i == ops.size() || !s.ops[static_cast<size_t>(ops[i])].joined) {
        p.run_length[static_cast<size_t>(ops[head])] = static_cast<int32_t>(i - head);
        head = i;
      }
  }
  p.dependents_begin.assign(n + 1, 0);
  for (const Op& op : s.ops)
    for (OpId d : op.deps) ++p.dependents_begin[static_cast<size_t>(d) + 1];
  for (size_t i = 0; i < n; ++i) p.dependents_begin[i + 1] += p.dependents_begin[i];
  p.dependents.resize(static_cast<size_t>(p.dependents_begin[n]));
  std::vector<int64_t> fill(p.dependents_begin.begin(), p.dependents_begin.end() - 1);
  for (const Op& op : s.ops)
    for (OpId d : op.deps) p.dependents[static_cast<size_t>(fill[static_cast<size_t>(d)]++)] = op.id;
  for (const auto& call : p.match.calls)
    for (size_t i = 0; i < call.size(); ++i)
      if (call[i] >= 0) p.member_of[static_cast<size_t>(call[i])] = static_cast<int32_t>(i);
  for (const auto& r : s.ranks) p.gpu_of_rank.push_back(r.gpu);
  return p;
}

std::vector<cost::PlannedTransfer> plan_call(const schedule::Schedule& s, const ExecPlan& p, int64_t call) {
  const auto& ops = p.match.calls[static_cast<size_t>(call)];
  const Op& first = s.ops[static_cast<size_t>(ops.front())];
  int root = 0;
  if (first.kind == schedule::OpKind::broadcast) {
    const auto& members = s.groups[static_cast<size_t>(first.group)].ranks;
    root = static_cast<int>(std::find(members.begin(), members.end(), first.peer) - members.begin());
  }
  return cost::CostModel::plan_collective(first.kind, static_cast<int>(ops.size()), double(first.bytes), root);
}

void check_all_ended(const schedule::Schedule& s, const std::vector<double>& end) {
  for (size_t i = 0; i < end.size(); ++i)
    if (end[i] < 0)
      throw schedule::ScheduleError(
          fmt::format("{}: never runs (the schedule deadlocks; run schedule::validate for the cause)",
                      schedule::describe(s, static_cast<OpId>(i))));
}

void begin_call(const schedule::Schedule& s, const ExecPlan& p, int64_t c, CallRun& run, std::vector<Xfer>& xfers) {
  run.plan = plan_call(s, p, c);
  const auto& members = p.match.calls[static_cast<size_t>(c)];
  run.member_left.assign(members.size(), 0);
  run.dependents_begin.assign(run.plan.size() + 1, 0);
  for (const auto& x : run.plan) {
    ++run.member_left[static_cast<size_t>(x.src)];
    ++run.member_left[static_cast<size_t>(x.dst)];
    for (int32_t d : x.deps)
      if (d >= 0) ++run.dependents_begin[static_cast<size_t>(d) + 1];
  }
  for (size_t i = 0; i < run.plan.size(); ++i) run.dependents_begin[i + 1] += run.dependents_begin[i];
  run.dependents.resize(static_cast<size_t>(run.dependents_begin.back()));
  std::vector<int32_t> fill(run.dependents_begin.begin(), run.dependents_begin.end() - 1);
  run.base = static_cast<int64_t>(xfers.size());
  for (size_t i = 0; i < run.plan.size(); ++i) {
    int32_t deps = 0;
    for (int32_t d : run.plan[i].deps)
      if (d >= 0) {
        ++deps;
        run.dependents[static_cast<size_t>(fill[static_cast<size_t>(d)]++)] = static_cast<int32_t>(i);
      }
    xfers.push_back({c, static_cast<int32_t>(i), deps});
  }
}

RunState::RunState(const schedule::Schedule& s, const ExecPlan& p) {
  const size_t n = s.ops.size();
  times.start.assign(n, -1.0);
  times.end.assign(n, -1.0);
  deps_left.resize(n);
  for (const auto& op : s.ops) deps_left[static_cast<size_t>(op.id)] = static_cast<int32_t>(op.deps.size());
  head.assign(p.streams.size(), 0);
  run_left.assign(p.streams.size(), 0);
  arrived.assign(p.match.calls.size(), 0);
  calls.resize(p.match.calls.size());
}

}  // namespace rm::engine
