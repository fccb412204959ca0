#include "sim/engine/exec_plan.hpp"

#include <algorithm>
#include <memory>

#include "sim/schedule/call_shape.hpp"

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

void begin_call(const schedule::Schedule& s, const schedule::RunPlan& p, int64_t c, CallRun& run, CallShapes& shapes) {
  begin_call(schedule::call_shape_key(s, p.match.calls[static_cast<size_t>(c)]), run, shapes);
}

void begin_call(const schedule::CallShapeKey& k, CallRun& run, CallShapes& shapes) {
  run.fold = k.spanning() ? k.members : 0;
  auto& shape = shapes[k];
  if (!shape)
    shape = make_shape(cost::plan_collective(k), size_t(k.members), run.fold);
  run.shape = shape;
  run.member_left = shape->member_left;
  run.deps_left = shape->deps;
  run.xfers_left = static_cast<int64_t>(shape->plan.size());
}

RunState::RunState(const schedule::RunPlan& p) {
  const size_t n = p.stream_of.size();
  times.start.assign(n, -1.0);
  times.end.assign(n, -1.0);
  calls.resize(p.match.calls.size());
}

}  // namespace rm::engine
