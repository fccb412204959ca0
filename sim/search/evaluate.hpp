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
  int64_t ops = 0;  // ops simulated (one replica's under the shortcut; both pieces' when estimated)
  std::string generator;
  bool one_replica = false;  // simulated one data-parallel replica for all (exact: EvaluateOptions::symmetry_above_ops)
  // Streamed (docs/engines.md, "Streaming"): the whole step would not fit this
  // machine's memory and the streamed run did (EvaluateOptions::stream); the
  // figures are the whole run's, bound_by included (always: a second streamed
  // run for it would cost more than gathering it in the first).
  bool streamed = false;
  // Empty when the report is a simulated step; else how it was estimated
  // (EvaluateOptions::extrapolate_above_ops): its figures are not a simulation's.
  std::string estimated;
};

// How a point's figures were had, in one word or two: "whole", "one replica"
// (the data-parallel shortcut), "streamed", "streamed, one replica", or
// "estimated" (from fewer layers); empty for a point that could not run.
std::string simulated_as(const Outcome& o);

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
  // The data-parallel shortcut (docs/engines.md, "Replica symmetry"): where it is
  // exact, simulate replica 0 alone (analytic engine only; the report then has no
  // bound_by). Step times are equal to the bit; sums over ranks can move in the
  // last digits, so it is off unless asked for.
  // Used for the points whose full Schedule holds more than symmetry_above_ops
  // ops (generate::count_step_ops); -1: never, 0: wherever exact.
  int64_t symmetry_above_ops = -1;
  // Scope `step`: a point whose Schedule (one replica's under the shortcut)
  // would hold more ops than this, or would not fit this machine's memory
  // (generate::estimate_footprint), is not simulated whole but estimated from full
  // steps of the same layout with 1 and up to kEstimateLayers layers
  // (extrapolate_layers); -1: never.
  int64_t extrapolate_above_ops = -1;
  // A point whose step would not fit this machine's memory whole
  // (generate::estimate_footprint) but would streamed (estimate_stream_footprint)
  // is simulated streamed (pipeline::StreamWhen::if_needed: `simulate --stream
  // auto` streams wherever it fits, but a whole step lets a worker reuse its
  // Schedule across points), with the same fallbacks as `simulate`: a route that
  // leaves the data-parallel shortcut streams the full step. Analytic engine
  // only, after the estimate above where that is asked for.
  bool stream = true;
};

// The step of `e` (scope step, L layers) estimated from simulated steps of the
// same experiment with 1 and n2 layers, r1 and r2: the n2 - 1 layers past the
// first carry a layer's forward, recomputation, backward and gradient traffic
// each in its place among the others; the 1-layer step carries the embedding,
// the LM head and loss, the optimizer and what does not grow with depth. Each
// additive figure (step time, FLOPs, the mean rank's breakdown, critical-path
// shares) is x1 + (L - 1)(x2 - x1) / (n2 - 1); MFU, HFU and tokens/s follow
// from them; imbalance is r2's, memory e's own (memory::estimate_memory),
// bound_by absent. Layers differ (each draws its own sparse pattern), so the
// more layers the second sample averages, the closer (docs/planner.md, "At scale").
report::StepReport extrapolate_layers(const Experiment& e, const report::StepReport& r1, const report::StepReport& r2,
                                      int n2 = 2);
// The most layers the second sample of an estimated step has (evaluate_one):
// fewer where that step would itself be too large or L is smaller.
inline constexpr int kEstimateLayers = 4;
// e with model.layers = n (fields and resolved JSON; n <= e.model.layers).
Experiment with_layers(const Experiment& e, int n);

// The number of worker threads `jobs` means on this machine (>= 1).
int worker_count(int jobs);

// Simulates every point; never throws for a point that fails (its Outcome says why).
std::vector<Outcome> evaluate(const std::vector<Experiment>& points, const EvaluateOptions& o);

// One point on a given session: what each worker runs (and the serial oracle in tests).
Outcome evaluate_one(const Experiment& e, engine::EngineKind kind, pipeline::Session& session, bool bound_by = true);
// The same with the options' shortcut and estimate (EvaluateOptions::symmetry_above_ops, ::extrapolate_above_ops).
Outcome evaluate_one(const Experiment& e, const EvaluateOptions& o, pipeline::Session& session);

}  // namespace rm::search
