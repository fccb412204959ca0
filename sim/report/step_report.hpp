// The step report of `ringmaster simulate`: from a Schedule and the Timeline an
// engine predicted (or the runtime measured) for it — step time, tokens/s,
// MFU and HFU, the per-rank time breakdown, attention imbalance and the critical path.
// Works on any Timeline that joins the Schedule on op ids; events of ops the
// Schedule lacks count in the breakdown only. docs/report.md defines every
// figure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/experiment.hpp"
#include "sim/memory/memory_model.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::report {

// Seconds of one rank within [begin, end] of the Timeline; the three add up to
// the step time.
struct RankTime {
  int rank = -1;              // -1 in the mean and max rows
  double compute_s = 0;       // some compute stream busy (union)
  double exposed_comm_s = 0;  // some communication stream busy, no compute stream
  double idle_s = 0;          // neither
};

struct Breakdown {
  std::vector<RankTime> per_rank;  // every rank of the Schedule, by id
  RankTime mean, min, max;         // each column on its own
};

// Attention imbalance of the forward attention ops (attn_fwd, phase forward),
// with work[r][(layer, step)] per rank r and ring step, an op's work being its
// tiles (blocks), or its FLOPs when it has none. Over layers as
// sim/report/imbalance.hpp does: sums of maxima over sums of means.
struct Imbalance {
  double worker = 1;         // planned: sum_l max_r sum_k work / sum_l mean_r sum_k work
  double step = 1;           // planned: sum_{l,k} max_r work / sum_{l,k} mean_r work
  double step_measured = 1;  // the step ratio on the Timeline's durations of those ops
};

struct StepReport {
  int gpus = 0;           // ranks of the Schedule
  double step_time_s = 0;  // makespan of the Timeline
  // dp * batch * seq_len / step time. For scope `step` the training throughput;
  // for the other scopes the rate of the one layer (or its attention) the
  // Schedule holds over the whole batch — not a training throughput.
  double tokens_per_s = 0;
  Scope scope = Scope::step;  // what one "step" is: the text labels tokens/s by it
  // FLOPs (sim/cost/model_flops.hpp) over the peak of the step: step time x gpus x peak bf16.
  double model_flops = 0;               // the scope by the MFU convention, attention over the mask's non-zeros
  double dense_causal_model_flops = 0;  // the same with dense causal attention
  double executed_flops = 0;            // what the kernels execute: whole tiles, recomputation included
  double mfu = 0;                       // model_flops / peak
  double hfu = 0;                       // executed_flops / peak
  // dense_causal_model_flops / model_flops: how many times longer a dense
  // causal step would take at the same MFU (1 for a dense causal pattern).
  double dense_equivalent_speedup = 1;
  Breakdown breakdown;
  Imbalance imbalance;
  CriticalPath critical_path;
  // false in a streamed run (stream_report.hpp): the path needs every op at once,
  // so it is not traced; to_json writes null and to_text says so.
  bool critical_path_traced = true;
  memory::MemoryReport memory;  // per-GPU memory of the configuration's training step (sim/memory/)
  // What bounds the step (bound_by.hpp); filled where the Topology is known
  // (pipeline::simulate_schedule), absent from make_step_report alone.
  std::optional<BoundBy> bound_by;
};

StepReport make_step_report(const Experiment& e, const schedule::Schedule& s, const traces::Timeline& tl);

// What the step report reads of the Schedule alone: FLOPs and the planned
// imbalance, with where each forward attention op's measured time goes.
// Computed once per Schedule; valid for every experiment with its
// pipeline::schedule_key (a sweep's cluster what-ifs share it).
struct StepSums {
  double mask_attention_fwd_flops = 0;  // cost::mask_attention_fwd_flops
  double executed_flops = 0;            // over the compute ops, in op order
  std::vector<std::pair<int, int>> rows;  // the (layer, step) keys of forward attention ops, ascending
  struct AttentionOp {
    schedule::OpId id;
    int rank, row;  // row: index into rows
  };
  std::vector<AttentionOp> attention;  // the forward attention ops, in op order
  double worker = 1, step = 1;         // Imbalance::worker and ::step (planned)
};
StepSums step_sums(const Experiment& e, const schedule::Schedule& s);

// Keys: step_time_s, tokens_per_s, flops {model, dense_causal_model, executed},
// mfu, hfu, dense_equivalent_speedup, gpus, breakdown {per_rank [...], mean,
// min, max}, imbalance {worker, step, step_measured}, critical_path {length_s,
// ops, op_ids, compute_s, communication_s, waiting_s, by_kind [...]},
// memory {peak_GB, capacity_GB, oom, terms {...}, ...} (memory::to_json), and
// bound_by {...} (bound_by.hpp) when it was filled.
nlohmann::json to_json(const StepReport& r);

// A human summary with aligned tables. Above 8 ranks the rank table shows the
// 3 slowest ranks (least idle time) and min / mean / max instead of every rank.
std::string to_text(const StepReport& r);

}  // namespace rm::report
