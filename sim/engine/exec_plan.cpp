#include "sim/engine/exec_plan.hpp"

#include <algorithm>

#include "sim/engine/symmetry.hpp"

namespace rm::engine {

using schedule::Op;

ExecPlan::ExecPlan(const schedule::Schedule& s, const schedule::RunPlan& r, const cost::CostModel& m,
                   const FixedDurations* fixed)
    : run(r), compute_s(s.ops.size(), 0.0) {
  // The plan's roles say which ops compute: only those Ops are read (they are large).
  for (size_t i = 0; i < s.ops.size(); ++i) {
    if (r.role[i] != schedule::RunPlan::Role::compute) continue;
    const bool is_fixed = fixed != nullptr && i < fixed->size() && (*fixed)[i] >= 0;
    compute_s[i] = is_fixed ? (*fixed)[i] : m.compute_seconds(s, s.ops[i]);
  }
  for (const auto& rank : s.ranks) gpu_of_rank.push_back(rank.gpu);
}

std::vector<cost::PlannedTransfer> plan_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t call) {
  const auto& ops = p.match.calls[static_cast<size_t>(call)];
  const Op& first = s.ops[static_cast<size_t>(ops.front())];
  int root = 0;
  if (first.kind == schedule::OpKind::broadcast) {
    const auto& members = s.groups[static_cast<size_t>(first.group)].ranks;
    root = static_cast<int>(std::find(members.begin(), members.end(), first.peer) - members.begin());
  }
  return cost::CostModel::plan_collective(first.kind, static_cast<int>(ops.size()), double(first.bytes), root);
}

void begin_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t c, CallRun& run,
                std::vector<Xfer>& xfers) {
  const auto& members = p.match.calls[static_cast<size_t>(c)];
  const Op& first = s.ops[static_cast<size_t>(members.front())];
  if (s.symmetry.replicas > 1 && s.groups[static_cast<size_t>(first.group)].spans_replicas) {
    run.fold = static_cast<int32_t>(members.size());
    run.plan = plan_replicated(first.kind, run.fold, s.symmetry.replicas, double(first.bytes));
  } else {
    run.fold = 0;
    run.plan = plan_call(s, p, c);
  }
  run.member_left.assign(members.size(), 0);
  run.dependents_begin.assign(run.plan.size() + 1, 0);
  for (const auto& x : run.plan) {
    ++run.member_left[static_cast<size_t>(run.slot(x.src))];
    ++run.member_left[static_cast<size_t>(run.slot(x.dst))];
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

RunState::RunState(const schedule::RunPlan& p) {
  const size_t n = p.stream_of.size();
  times.start.assign(n, -1.0);
  times.end.assign(n, -1.0);
  calls.resize(p.match.calls.size());
}

}  // namespace rm::engine
