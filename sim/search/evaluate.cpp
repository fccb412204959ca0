#include "sim/search/evaluate.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "sim/generate/footprint.hpp"
#include "sim/generate/generate.hpp"
#include "sim/engine/stream_run.hpp"
#include "sim/pipeline/stream_choice.hpp"
#include "sim/memory/memory_model.hpp"

namespace rm::search {

std::string simulated_as(const Outcome& o) {
  if (!o.ok) return {};
  if (!o.estimated.empty()) return "estimated";
  if (o.streamed) return o.one_replica ? "streamed, one replica" : "streamed";
  return o.one_replica ? "one replica" : "whole";
}

int worker_count(int jobs) {
  if (jobs > 0) return jobs;
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

Outcome evaluate_one(const Experiment& e, engine::EngineKind kind, pipeline::Session& session, bool bound_by) {
  Outcome out;
  try {
    generate::check_fits(generate::estimate_footprint(e, generate::RunKind::simulate), "this point");
    pipeline::PointResult r = session.run_point(e, kind, bound_by);
    out.ops = r.ops;
    out.generator = std::move(r.generator);
    out.report = std::move(r.report);
    out.ok = true;
  } catch (const ConfigError& err) {
    out.error = err.what();
  }
  return out;
}

namespace {

// Whether the options ask for the shortcut on `e` and it may apply (replica_refusal;
// the generated replica's routes are checked when it is built).
bool wants_symmetry(const Experiment& e, const EvaluateOptions& o, pipeline::Session& session) {
  if (o.symmetry_above_ops < 0 || o.engine != engine::EngineKind::analytic || e.parallel.dp < 2) return false;
  if (o.symmetry_above_ops > 0 && generate::count_step_ops(e) <= o.symmetry_above_ops) return false;
  return generate::replica_refusal(e, session.topology(e)).empty();
}

// A point too large to hold whole, streamed where that fits (EvaluateOptions::stream;
// pipeline::choose_and_stream decides, as for `simulate`); nullopt: not streamed.
std::optional<Outcome> streamed_point(const Experiment& e, const EvaluateOptions& o, pipeline::Session& session,
                                      bool one) {
  if (!o.stream || o.engine != engine::EngineKind::analytic) return std::nullopt;
  pipeline::StreamFacts facts;
  try {
    facts = pipeline::stream_facts(e, one);
  } catch (const ConfigError&) {
    return std::nullopt;  // the whole run says what is wrong with it
  }
  Outcome out;
  try {
    pipeline::StreamChoice c = pipeline::stream_step(session, e, pipeline::StreamWhen::if_needed, one, facts);
    if (!c.run) return std::nullopt;
    out.ops = c.run->stats.ops;
    out.generator = std::move(c.run->generator);
    out.report = std::move(c.run->report);
    out.one_replica = c.one_replica;
    out.streamed = true;
    out.ok = true;
  } catch (const ConfigError& x) {
    out.error = x.what();
  }
  return out;
}

// One point simulated as a whole step, through the shortcut where asked for and exact.
Outcome simulate_point(const Experiment& e, const EvaluateOptions& o, pipeline::Session& session) {
  const bool try_one = wants_symmetry(e, o, session);
  if (auto streamed = streamed_point(e, o, session, try_one)) return std::move(*streamed);
  if (!try_one) return evaluate_one(e, o.engine, session, o.bound_by);
  Outcome out;
  try {
    generate::check_fits(generate::estimate_footprint(e, generate::RunKind::simulate, true), "this point");
    std::string why_not;
    std::optional<schedule::Schedule> one = session.one_replica_schedule(e, why_not);
    if (!one) return evaluate_one(e, o.engine, session, o.bound_by);
    out.ops = int64_t(one->ops.size());
    out.generator = one->generator;
    out.report =
        pipeline::simulate_schedule(e, std::move(*one), session.topology(e), o.engine, pipeline::WithTimeline::no).report;
    out.one_replica = true;
    out.ok = true;
  } catch (const ConfigError& err) {
    out.error = err.what();
  }
  return out;
}

}  // namespace

Experiment with_layers(const Experiment& e, int n) {
  Experiment x = e;
  x.model.layers = n;
  x.resolved["model"]["layers"] = n;
  return x;
}

report::StepReport extrapolate_layers(const Experiment& e, const report::StepReport& r1, const report::StepReport& r2,
                                      int n2) {
  const double L = e.model.layers;
  auto lin = [&](double a, double b) { return a + (L - 1) * (b - a) / (n2 - 1); };
  report::StepReport r = r2;
  r.step_time_s = lin(r1.step_time_s, r2.step_time_s);
  r.model_flops = lin(r1.model_flops, r2.model_flops);
  r.dense_causal_model_flops = lin(r1.dense_causal_model_flops, r2.dense_causal_model_flops);
  r.executed_flops = lin(r1.executed_flops, r2.executed_flops);
  // The peak a report divides by is its gpus x peak x step: scale r2's ratios.
  const double time_ratio = r2.step_time_s / r.step_time_s;
  r.mfu = r2.model_flops > 0 ? r2.mfu * (r.model_flops / r2.model_flops) * time_ratio : 0;
  r.hfu = r2.executed_flops > 0 ? r2.hfu * (r.executed_flops / r2.executed_flops) * time_ratio : 0;
  r.tokens_per_s = r2.tokens_per_s * time_ratio;
  r.dense_equivalent_speedup = r.model_flops > 0 ? r.dense_causal_model_flops / r.model_flops : 1;
  for (report::RankTime* t : {&r.breakdown.mean, &r.breakdown.min, &r.breakdown.max}) {
    const report::RankTime& a = t == &r.breakdown.mean ? r1.breakdown.mean
                                : t == &r.breakdown.min ? r1.breakdown.min
                                                        : r1.breakdown.max;
    t->compute_s = lin(a.compute_s, t->compute_s);
    t->exposed_comm_s = lin(a.exposed_comm_s, t->exposed_comm_s);
    t->idle_s = lin(a.idle_s, t->idle_s);
  }
  r.breakdown.per_rank.clear();  // a rank's own row is not estimated
  r.critical_path.length_s = lin(r1.critical_path.length_s, r2.critical_path.length_s);
  r.critical_path.compute_s = lin(r1.critical_path.compute_s, r2.critical_path.compute_s);
  r.critical_path.communication_s = lin(r1.critical_path.communication_s, r2.critical_path.communication_s);
  r.critical_path.waiting_s = lin(r1.critical_path.waiting_s, r2.critical_path.waiting_s);
  r.critical_path.ops.clear();  // op ids of a sample Schedule name nothing of this one
  for (report::CriticalPathShare& k : r.critical_path.by_kind) {
    double a = 0;  // absent from the 1-layer path: it starts with the second layer
    for (const report::CriticalPathShare& j : r1.critical_path.by_kind)
      if (j.kind == k.kind && j.phase == k.phase) a = j.seconds;
    k.seconds = lin(a, k.seconds);
  }
  r.memory = memory::estimate_memory(e);
  r.bound_by.reset();
  return r;
}

Outcome evaluate_one(const Experiment& e, const EvaluateOptions& o, pipeline::Session& session) {
  if (o.extrapolate_above_ops < 0 || e.scope != Scope::step || e.model.layers < 3)
    return simulate_point(e, o, session);
  const bool one = wants_symmetry(e, o, session);
  auto ops_of = [&](const Experiment& x) { return one ? generate::count_replica_ops(x) : generate::count_step_ops(x); };
  // Small enough to simulate whole here: the ops, and the machine's memory (the
  // check simulate_point would refuse it by).
  auto fits = [&](const Experiment& x) {
    if (ops_of(x) > o.extrapolate_above_ops) return false;
    try {
      generate::check_fits(generate::estimate_footprint(x, generate::RunKind::simulate, one), "this point");
    } catch (const ConfigError&) {
      return false;
    }
    return true;
  };
  if (fits(e)) return simulate_point(e, o, session);
  const int64_t ops = ops_of(e);
  // The second sample: as many layers as kEstimateLayers allows below L, fewer
  // where that step would itself be too large (2 at the least).
  int n2 = 2;
  for (int n = std::min(kEstimateLayers, e.model.layers - 1); n > 2; --n)
    if (fits(with_layers(e, n))) {
      n2 = n;
      break;
    }
  EvaluateOptions po = o;
  po.bound_by = false;  // bound_by of a sample step would not be this step's
  const Outcome a = simulate_point(with_layers(e, 1), po, session);
  if (!a.ok) return a;
  const Outcome b = simulate_point(with_layers(e, n2), po, session);
  if (!b.ok) return b;
  Outcome out = b;
  out.ops = a.ops + b.ops;
  out.report = extrapolate_layers(e, a.report, b.report, n2);
  out.estimated = fmt::format("extrapolated from 1- and {}-layer steps (the whole step, {} ops{}, is too large to "
                              "simulate here)",
                              n2, ops, one ? " for one replica" : "");
  return out;
}

std::vector<Outcome> evaluate(const std::vector<Experiment>& points, const EvaluateOptions& o) {
  const int64_t n = static_cast<int64_t>(points.size());
  std::vector<Outcome> out(points.size());
  const bool simgrid = o.engine == engine::EngineKind::simgrid;
  const int workers = simgrid ? 1 : std::max(1, std::min<int>(worker_count(o.jobs), static_cast<int>(n)));

  // Work goes out in tasks of points with equal Schedule inputs (their input
  // order kept), so a worker's Session reuses one Schedule across a group's
  // cluster what-ifs (Session::run_point); a task holds at most a 1/(2 workers)
  // share of the points, so one large group still spreads over every worker.
  std::vector<std::vector<int64_t>> tasks;
  {
    const int64_t cap = std::max<int64_t>(1, (n + 2 * workers - 1) / (2 * workers));
    std::map<std::string, size_t> open;  // key -> the task now filling
    for (int64_t i = 0; i < n; ++i) {
      auto [it, fresh] = open.try_emplace(pipeline::schedule_key(points[size_t(i)]), tasks.size());
      if (fresh || int64_t(tasks[it->second].size()) == cap) {
        it->second = tasks.size();
        tasks.emplace_back();
      }
      tasks[it->second].push_back(i);
    }
  }
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  std::atomic<int64_t> next{0};
  std::mutex progress_mutex;
  int64_t done = 0;
  std::exception_ptr failure;  // anything but a ConfigError: a bug, rethrown on the caller's thread
  std::deque<pipeline::Session> fresh;
  std::deque<pipeline::Session>& pool = o.sessions ? *o.sessions : fresh;
  while (pool.size() < size_t(workers)) pool.emplace_back();
  auto work = [&](int w) {
    pipeline::Session& session = pool[size_t(w)];
    for (int64_t t = next++; t < n_tasks; t = next++)
      for (int64_t i : tasks[size_t(t)]) {
        try {
          out[size_t(i)] = evaluate_one(points[size_t(i)], o, session);
        } catch (...) {
          std::lock_guard lock(progress_mutex);
          if (!failure) failure = std::current_exception();
          next = n_tasks;  // stop handing out points
          session.release_schedule();
          return;
        }
        std::lock_guard lock(progress_mutex);
        ++done;
        if (o.progress) o.progress(done, n);
      }
    session.release_schedule();
  };
  if (workers == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(workers);
    for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
    for (auto& t : threads) t.join();
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace rm::search
