#include "sim/engine/exec_plan.hpp"

#include <algorithm>
#include <memory>

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

namespace {

std::shared_ptr<const CallShape> make_shape(std::vector<cost::PlannedTransfer> plan, size_t members, int32_t fold) {
  auto sh = std::make_shared<CallShape>();
  sh->plan = std::move(plan);
  auto slot = [&](int m) { return fold > 0 ? m % fold : m; };
  sh->member_left.assign(members, 0);
  sh->dependents_begin.assign(sh->plan.size() + 1, 0);
  sh->deps.assign(sh->plan.size(), 0);
  for (size_t i = 0; i < sh->plan.size(); ++i) {
    const auto& x = sh->plan[i];
    ++sh->member_left[static_cast<size_t>(slot(x.src))];
    ++sh->member_left[static_cast<size_t>(slot(x.dst))];
    for (int32_t d : x.deps)
      if (d >= 0) ++sh->dependents_begin[static_cast<size_t>(d) + 1], ++sh->deps[i];
  }
  for (size_t i = 0; i < sh->plan.size(); ++i) sh->dependents_begin[i + 1] += sh->dependents_begin[i];
  sh->dependents.resize(static_cast<size_t>(sh->dependents_begin.back()));
  std::vector<int32_t> fill(sh->dependents_begin.begin(), sh->dependents_begin.end() - 1);
  for (size_t i = 0; i < sh->plan.size(); ++i)
    for (int32_t d : sh->plan[i].deps)
      if (d >= 0) sh->dependents[static_cast<size_t>(fill[static_cast<size_t>(d)]++)] = static_cast<int32_t>(i);
  return sh;
}

}  // namespace

void begin_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t c, CallRun& run,
                std::vector<Xfer>& xfers, CallShapes& shapes) {
  const auto& members = p.match.calls[static_cast<size_t>(c)];
  const Op& first = s.ops[static_cast<size_t>(members.front())];
  const bool spanning = s.symmetry.replicas > 1 && s.groups[static_cast<size_t>(first.group)].spans_replicas;
  int root = 0;  // as plan_call resolves it
  if (!spanning && first.kind == schedule::OpKind::broadcast) {
    const auto& ranks = s.groups[static_cast<size_t>(first.group)].ranks;
    root = static_cast<int>(std::find(ranks.begin(), ranks.end(), first.peer) - ranks.begin());
  }
  run.fold = spanning ? static_cast<int32_t>(members.size()) : 0;
  auto& shape = shapes[{static_cast<int>(first.kind), static_cast<int>(members.size()),
                        spanning ? s.symmetry.replicas : 0, first.bytes, root}];
  if (!shape)
    shape = make_shape(spanning ? plan_replicated(first.kind, run.fold, s.symmetry.replicas, double(first.bytes))
                                : plan_call(s, p, c),
                       members.size(), run.fold);
  run.shape = shape;
  run.member_left = shape->member_left;
  run.base = static_cast<int64_t>(xfers.size());
  for (size_t i = 0; i < shape->plan.size(); ++i)
    xfers.push_back({c, static_cast<int32_t>(i), shape->deps[i]});
}

RunState::RunState(const schedule::RunPlan& p) {
  const size_t n = p.stream_of.size();
  times.start.assign(n, -1.0);
  times.end.assign(n, -1.0);
  calls.resize(p.match.calls.size());
}

}  // namespace rm::engine
