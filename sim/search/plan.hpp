// `ringmaster plan`: the fastest layout of one experiment on its cluster.
// The search (docs/planner.md):
//   1. enumerate the space (plan_space.hpp) and drop what the simulator refuses;
//   2. drop what does not fit in GPU memory (plan_memory.hpp), keeping the
//      smallest shortfall for the "nothing fits" message;
//   3. simulate the experiment's own layout (the seed) with the analytic engine:
//      it is the first incumbent and gives the mask's FLOPs to the bound;
//   4. (scope step, `screen`) simulate one decoder layer of each layout, best
//      first under the layer's floor, and keep the layouts of the best few
//      distinct layer times — a heuristic;
//   5. best first by the floor (plan_bound.hpp: compute, or the busiest ring
//      stream when that is larger): simulate full steps, in
//      batches of a fixed size, of the layouts whose floor is at most the K-th
//      best distinct time per token found so far; stop at the first floor above
//      it. A floor never exceeds its layout's analytic time, so the K best of the
//      layouts this stage sees are exact;
//   6. re-simulate the K best with SimGrid; the winner is the fastest there
//      (not where a step was estimated or simulated one replica for all: SimGrid
//      runs whole Schedules, and one that large does not fit this machine);
//   7. say why each runner-up lost (reason_lost), and what bounds each printed
//      step (bound_by: computed for the printed candidates only).
// At scale (thousands of GPUs) a full step is too large to simulate whole: the
// data-parallel shortcut (exact) runs one replica where the step holds more than
// symmetry_above_ops ops, and a step still above extrapolate_above_ops is
// estimated from steps of 1 and up to 4 layers (evaluate.hpp); such figures say so.
// Layouts are ranked by time per token (step time / (dp x batch x seq_len)):
// data parallelism multiplies the tokens of a step, so step time alone would
// always prefer dp = 1. Ties go to the earlier layout of the enumeration, and
// layouts whose analytic times are equal to the bit count as one (equivalents):
// the K runners-up are K distinct times.
// Deterministic: the batches do not depend on the number of worker threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/search/evaluate.hpp"
#include "sim/search/plan_bound.hpp"
#include "sim/search/plan_memory.hpp"
#include "sim/search/plan_space.hpp"

namespace rm::search {

inline constexpr int64_t kSymmetryAboveOps = 1'000'000;
inline constexpr int64_t kExtrapolateAboveOps = 8'000'000;
// The most a plan enumerates, known before enumerating (count_space): above
// either limit the plan is refused, naming the count, the estimate and how to
// narrow the space (docs/planner.md, "The bound"). The largest documented
// space (4,096 GPUs at 4M, 687,258 layouts) is under both; a 100,000-node
// cluster's hierarchical rings alone would take hours to check.
inline constexpr int64_t kMaxPlanLayouts = 2'000'000;
inline constexpr double kMaxEnumerationSeconds = 60;

struct PlanOptions {
  SpaceOptions space;
  int64_t max_layouts = kMaxPlanLayouts;              // refuse a larger space (count_space)
  double max_enumeration_s = kMaxEnumerationSeconds;  // or one estimated to take longer (enumeration_seconds)
  int top_k = 5;
  bool confirm_simgrid = true;  // re-simulate the K best with SimGrid
  int jobs = 0;                 // analytic worker threads; 0 = every core
  bool prune = true;            // false: simulate every layout that fits (the oracle)
  // With scope `step`: first simulate one decoder layer of every layout (the
  // screen, ~1/30 of a step's ops; the ZeRO stage set aside) and simulate full
  // steps only for the layouts of the screen_keep best layers. A heuristic (a
  // layer is not the step: the LM head, optimizer and ZeRO traffic are left
  // out), off for an exact search.
  bool screen = true;
  int screen_keep = 0;          // 0: max(8, 3 x top_k)
  // Layers whose simulation would hold more ops (one replica's under the
  // shortcut) are not screened, and so not kept: at 4,096 GPUs a cp >= 512 layer
  // is millions of ops and tens of seconds. 0: no limit. The default experiment's
  // layers hold ~15K ops.
  int64_t screen_max_ops = 1'000'000;
  // At most this many layer simulations (whole batches, in floor order: the
  // lowest floors first), then the best found so far are kept. 0: no limit.
  int64_t screen_budget = 0;
  // Layouts simulated per batch of the best-first search: fixed, so what is
  // simulated (and printed) does not depend on the number of threads.
  int batch = 8;
  // Points whose full step holds more ops use the data-parallel shortcut where
  // exact (-1: never); points whose (one replica's) step still holds more than
  // extrapolate_above_ops are estimated from steps of 1 and up to 4 layers (-1: never).
  // The defaults leave the default experiment's 32-GPU steps (~0.6M ops) alone.
  int64_t symmetry_above_ops = kSymmetryAboveOps;
  int64_t extrapolate_above_ops = kExtrapolateAboveOps;
  // (stage, done, total), from the calling thread between batches.
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

// What `plan --screen-budget auto` (the default) caps the screen at for a plan of
// `gpus` GPUs: no limit up to 1,024 GPUs (every shipped experiment and the
// quality cases of docs/planner.md), 64 layer simulations above (at 4,096 GPUs an
// unbounded screen would run for hours: docs/planner.md, "At scale").
int64_t auto_screen_budget(int gpus);

// What enumerating (and checking) a space of `gpus` GPUs takes on the 2-core
// development machine: a fixed cost per layout, and per hierarchical layout
// and GPU the structure check's walk over the ranks (measured: docs/planner.md).
inline constexpr double kEnumerateSecondsPerLayout = 2e-6;
inline constexpr double kEnumerateSecondsPerHierarchicalGpu = 1e-7;
double enumeration_seconds(const SpaceSize& n, int gpus);

struct PlanCandidate {
  int64_t index = -1;  // in the enumeration (-1: the seed, outside the searched space)
  Layout layout;
  MemoryFit memory;
  ComputeFloor floor;
  Outcome analytic;              // its analytic simulation
  bool confirmed = false;        // simulated with SimGrid too
  Outcome simgrid;
  std::string simgrid_skipped;   // why SimGrid did not re-simulate it (empty: it did, or was not asked)
  double tokens = 0;             // dp x batch x seq_len
  std::string reason;            // why it lost to the winner (empty for the winner)
  std::vector<Layout> equivalents;  // layouts simulated to the same time to the bit (after it in the enumeration)

  double step_time_s() const { return (confirmed && simgrid.ok ? simgrid : analytic).report.step_time_s; }
  double analytic_time_per_token() const { return analytic.report.step_time_s / tokens; }
};

struct PlanStats {
  int gpus = 0;
  int64_t enumerated = 0;     // points of the space before any check
  int64_t invalid = 0;        // refused by the parser or the generator
  int64_t oom = 0;            // do not fit in GPU memory
  int64_t screen_points = 0;  // distinct layers the screen could simulate
  int64_t screened = 0;       // layer simulations of the screen
  int64_t screen_pruned = 0;  // distinct layers skipped: their floor is above the screen's kept best
  int64_t screened_out = 0;   // layouts whose layer did not make the screen's best
  int64_t screen_too_large = 0;    // distinct layers above screen_max_ops: not screened
  bool screen_budget_hit = false;  // the screen stopped at screen_budget
  int64_t pruned_bound = 0;   // skipped: compute floor above the K-th best full step
  int64_t simulated = 0;      // full-step analytic simulations (the seed included)
  int64_t failed = 0;         // simulations that refused to run (e.g. too large for this machine)
  int64_t confirmed = 0;      // SimGrid simulations
  int64_t estimated = 0;      // full steps estimated from steps of 1 and up to 4 layers (counted in simulated)
  int64_t one_replica = 0;    // simulations (layers and steps) of one data-parallel replica for all
  int64_t streamed = 0;       // simulations streamed: too large to hold whole (EvaluateOptions::stream)
  // Skipped only thanks to the ring-transfer floor (their compute floor alone was at
  // most the final K-th best): of pruned_bound (layouts), and of screen_pruned (layers).
  int64_t pruned_comm = 0, screen_pruned_comm = 0;
  double smallest_shortfall_GB = 0;  // over the OOM layouts (when every layout is OOM: the message)
  std::string smallest_shortfall_layout;
  std::string first_invalid;  // the first refusal's reason
  std::string first_failure;  // the first failed simulation's reason
};

struct PlanResult {
  std::vector<PlanCandidate> ranked;  // the K best; ranked[0] is the winner
  PlanCandidate seed;                 // the experiment's own layout
  bool seed_in_space = false;         // it is one of the searched layouts
  PlanStats stats;
};

// Throws ConfigError when the space holds more than max_layouts layouts or
// would take more than max_enumeration_s to enumerate (before enumerating
// it), when no layout is valid, or none fits (naming the
// smallest shortfall), or none could be simulated.
PlanResult plan(const Experiment& base, const ConfigStore& store, const PlanOptions& o);

// Why `c` lost to `winner`: the largest of its per-token deltas in exposed
// communication, idle time (imbalance), recomputation and other compute, in words.
std::string reason_lost(const PlanCandidate& c, const PlanCandidate& winner);

}  // namespace rm::search
