// Evaluates many candidate configurations of one study — a sweep's grid
// points, a planner's candidates — on every core. Each worker thread keeps its
// own pipeline::Session (sparsity models are not thread-safe, and a session's
// caches pay off over the many points one worker sees); points go to whichever
// worker is free, points with equal Schedule inputs together (Session::run_point
// reuses their Schedule), so the outcome of a point never depends on which worker ran it.
// Results come back in the order of the input, byte-identical to a serial run.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/engine/engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/step_report.hpp"

namespace rm::search {

// One point's result: its StepReport, or the one-line reason it could not run
// (a ConfigError from generation or the footprint check).
struct Outcome {
  bool ok = false;
  std::string error;
  report::StepReport report;
  int64_t ops = 0;
  std::string generator;
};

struct EvaluateOptions {
  engine::EngineKind engine = engine::EngineKind::analytic;
  // Worker threads; 0 = every core. The SimGrid engine keeps one global
  // simulation per process, so with it points run one at a time whatever this says.
  int jobs = 0;
  // Called from worker threads (serialised) after each point: (points done, total).
  std::function<void(int64_t, int64_t)> progress;
  // Sessions kept across calls (worker w uses the w-th, added as needed): a
  // search that evaluates batch after batch builds each pattern once per
  // worker, not once per batch. Null: fresh sessions for this call.
  std::deque<pipeline::Session>* sessions = nullptr;
  // Fill each report's bound_by (a sweep row's `bound_by` needs it); a search
  // that only ranks its candidates can skip it (Session::run_point).
  bool bound_by = true;
};

// The number of worker threads `jobs` means on this machine (>= 1).
int worker_count(int jobs);

// Simulates every point; never throws for a point that fails (its Outcome says why).
std::vector<Outcome> evaluate(const std::vector<Experiment>& points, const EvaluateOptions& o);

// One point on a given session: what each worker runs (and the serial oracle in tests).
Outcome evaluate_one(const Experiment& e, engine::EngineKind kind, pipeline::Session& session, bool bound_by = true);

}  // namespace rm::search
