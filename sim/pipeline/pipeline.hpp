// The experiment pipeline: experiment -> sparsity patterns -> Schedule ->
// Timeline -> report, the one sequence the CLI, the benchmarks and the tests
// run. A Session caches what many candidate configurations of one experiment
// share: sparsity models (keyed by pattern spec, seq_len, seed and model
// shape) and partitions and pair costs (placement::WorkCache), so evaluating
// many variants builds each pattern and counts each distinct cost once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "sim/engine/stream_run.hpp"
#include "sim/generate/generate.hpp"
#include "sim/placement/work_cache.hpp"
#include "sim/report/fast_report.hpp"
#include "sim/report/imbalance.hpp"
#include "sim/report/step_report.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/topology/topology.hpp"
#include "traces/timeline.hpp"

namespace rm::pipeline {

// The experiment's sparsity model, built afresh (Session::patterns caches it).
// Throws ConfigError naming kernel.attention when a dense kernel (fa2, fa3)
// meets a pattern that needs a sparse index (check_kernel_runs).
sparsity::SparsityModel build_patterns(const Experiment& e);
// A dense kernel computes the mask it is given, not a sparse index: it cannot
// run vertical-slash, block-sparse or A-shape heads (an error rather than a
// silently different attention; the seeds' dense baselines run FA2 on a dense mask).
void check_kernel_runs(const Experiment& e, const sparsity::SparsityModel& m);

// Reads a Schedule file (validating it) and the experiment it carries, and
// checks one against the other (check_schedule_experiment). Before its ops
// are allocated, the file's op_count and ranks are checked against this
// machine's memory (generate::estimate_schedule_footprint, check_fits).
struct LoadedSchedule {
  schedule::Schedule schedule;
  Experiment experiment;
};
LoadedSchedule load_schedule_file(const std::string& path, const ConfigStore& store);
// schedule::check_carried_experiment (every rank on its own GPU, dp*tp*hp*cp
// ranks, token sets ending at seq_len: what ringmaster-run checks too), then:
// the experiment's pattern builds (build_patterns), and a
// Schedule whose generator is the one this experiment names
// (generate::generator_name) holds the op count it emits (count_step_ops).
// Throws ConfigError naming the file.
void check_schedule_experiment(const schedule::Schedule& s, const Experiment& e, const std::string& path);
// After simulating a Schedule file: an MFU above 100% means the carried
// experiment's model does more work than these ops take time for (an edited
// seq_len, ops' costs cut down), so its tokens/s and MFU would mislead.
// Throws ConfigError naming the file.
void check_report_plausible(const report::StepReport& r, const std::string& path);

struct Simulation {
  schedule::Schedule schedule;
  traces::Timeline timeline;  // metadata names the experiment; empty when built without one
  report::StepReport report;
};
// Whether simulate_schedule builds the Timeline. Without one the report comes
// straight from the engine's op times (report::fast_step_report, the sweep's
// path: the same figures, tests/sim/fast_report_test.cpp), which saves building
// an event per op. A one-replica Schedule (the data-parallel shortcut) takes
// either path too: both plan its spanning collectives by cost::plan_collective.
enum class WithTimeline { yes, no };
// Runs a Schedule of `e` through an engine, on e's topology and CostModel, and reports on it.
// threads > 1: without a Timeline, what the report reads of the Schedule alone
// (report::ReportPrep) is prepared on a second thread while the analytic engine
// runs (SimGrid forks, so it runs alone); the report is the same.
Simulation simulate_schedule(const Experiment& e, schedule::Schedule s, engine::EngineKind kind,
                             WithTimeline timeline = WithTimeline::yes, int threads = 1);
// The same on a Topology already built from e.cluster (Session::simulate builds it once per run).
Simulation simulate_schedule(const Experiment& e, schedule::Schedule s, const topology::Topology& topo,
                             engine::EngineKind kind, WithTimeline timeline = WithTimeline::yes, int threads = 1);

// What generate_step reads, as a string: equal keys give identical Schedules
// (up to Schedule::experiment, which records the experiment verbatim). The
// generators read the cluster only through the Topology's node structure
// (node_of, same_node: nodes and gpus_per_node) and the GPU (which picks the
// attention kernel's entry); link bandwidths, latencies, efficiencies and the
// cost section reach a step only through the engine's CostModel and Topology.
// So the key is the resolved experiment with its cluster cut down to nodes,
// gpus_per_node and gpu, plus where its parts were read from.
std::string schedule_key(const Experiment& e);

// One point of a sweep or search: the report, without the Schedule and Timeline.
struct PointResult {
  report::StepReport report;
  int64_t ops = 0;
  std::string generator;
};

// A streamed run (docs/engines.md, "Streaming"): the step generated chunk by chunk
// (a layer's forward, a layer's backward) and simulated as it comes by the analytic
// engine (engine::StreamRun), holding only the ops in flight; op times equal the
// whole run's bit for bit, and the report (report::StreamReport) equals its figures,
// without the critical path and bound_by.
struct StreamedSimulation {
  report::StepReport report;
  engine::StreamRun::Stats stats;
  std::string generator;
  int ranks = 0;  // simulated (replica 0's with the data-parallel shortcut)
  bool ring_step_chunks = false;  // chunks of a ring step (else of a layer's forward or backward)
};

class Session {
 public:
  // The experiment's sparsity model, built on first use; stays valid for the session.
  const sparsity::SparsityModel& patterns(const Experiment& e);
  // e.cluster's Topology, built once per distinct topology (Topology::key); stays valid for the session.
  const topology::Topology& topology(const Experiment& e);
  // e's step. Accesses::none (generate.hpp): costable-only, for a run that only
  // simulates it; a Schedule to write, hash or execute needs Accesses::all.
  schedule::Schedule schedule(const Experiment& e, generate::Accesses accesses = generate::Accesses::all);
  // The data-parallel shortcut (docs/engines.md, "Replica symmetry"): the Schedule of
  // replica 0 alone when simulating it is exact (generate::replica_refusal, then
  // engine::symmetry_refusal on its routes); else nullopt and `why_not` says why.
  // Costable-only (Accesses::none): it is only ever simulated, never written.
  std::optional<schedule::Schedule> one_replica_schedule(const Experiment& e, std::string& why_not);
  Simulation simulate(const Experiment& e, engine::EngineKind kind);  // of the costable-only Schedule
  // The streamed run of e's step (one replica for all with one_replica: the caller checked
  // generate::replica_refusal; a route that does not translate throws ScheduleError).
  // progress(ops so far) after each chunk. Throws engine::StreamNotExact where streaming
  // cannot be exact (stream_run.hpp).
  StreamedSimulation simulate_streamed(const Experiment& e, bool one_replica,
                                       const std::function<void(int64_t)>& progress = {});
  // The fast path of a sweep: like simulate(e, kind).report, but a point whose
  // schedule_key equals the previous point's reuses that Schedule, its RunPlan
  // and what the report reads of it alone (report::ReportPrep: a cluster
  // what-if regenerates nothing), and the report is read off the engine's op
  // times without building a Timeline (report::fast_step_report), figure for
  // figure the same. One Schedule is kept: it is large, and search::evaluate
  // hands a worker equal-key points together. With the analytic engine, a
  // point whose engine run would repeat the previous one's (a raised
  // capacity of links that never set a rate: engine::AnalyticReuse) takes its
  // op times without running. Without with_bound_by the
  // report's bound_by is left empty (a planner's pruned candidates).
  PointResult run_point(const Experiment& e, engine::EngineKind kind, bool with_bound_by = true);
  // Frees run_point's Schedule (search::evaluate does at the end of a batch, so
  // sessions kept between batches do not hold one each while the caller goes on).
  void release_schedule() { last_.reset(), reuse_.clear(), timed_ = {}; }
  report::ImbalanceReport imbalance(const Experiment& e, const std::vector<Partition>& partitions,
                                    const report::Progress& progress = {});

  placement::WorkCache& work() { return work_; }
  // Threads the per-head work of one experiment may use: drawing a layer's
  // patterns and counting their pair costs (default 1: a sweep's or plan's
  // workers each hold a Session and already fill the cores). Results do not
  // depend on it; `simulate`, `schedule` and `imbalance` pass default_threads().
  void set_threads(int threads);
  int64_t pattern_builds() const { return pattern_builds_; }
  int64_t schedule_builds() const { return schedule_builds_; }  // by run_point
  int64_t engine_runs_reused() const { return reuse_.reused(); }  // run_point's analytic runs skipped

 private:
  std::map<std::string, sparsity::SparsityModel> patterns_;  // map nodes stay put: work_ keys by identity
  std::map<std::string, topology::Topology> topologies_;     // by Topology::key
  placement::WorkCache work_;
  int64_t pattern_builds_ = 0;
  int threads_ = 1;
  struct Prepared {
    std::string key;
    schedule::Schedule schedule;
    schedule::RunPlan plan;
    report::ReportPrep report;  // from engine::timeline_edges(schedule, plan)
  };
  std::unique_ptr<const Prepared> last_;  // run_point's cached Schedule
  engine::AnalyticReuse reuse_;           // the last analytic run of last_'s Schedule
  report::TimedParts timed_;              // its report's parts that depend on its op times alone
  int64_t schedule_builds_ = 0;
};

}  // namespace rm::pipeline
