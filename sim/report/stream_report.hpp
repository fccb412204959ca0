// The step report of a streamed run (engine::StreamRun, docs/engines.md
// "Streaming"), gathered chunk by chunk as the run hands chunks back in op
// order, without ever holding every op: the same step time, FLOPs, tokens/s,
// MFU, HFU, imbalance and per-rank breakdown as fast_step_report gives on the
// whole run's op times, figure for figure (sums in the same order; the
// breakdown's interval unions swept in the same sorted order, each rank's
// intervals fed once no later op can start before them). The critical path
// comes from the run, which traces it as ops end (engine::StreamRun::
// critical_chain); what bounds the step from stream_bound_by.hpp, given the
// Topology and CostModel it ran on.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/report/report_core.hpp"
#include "sim/report/stream_bound_by.hpp"
#include "sim/report/step_report.hpp"
#include "sim/schedule/op_events.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::report {

class StreamReport {
 public:
  // meta: the Schedule's frame (ranks and their streams, symmetry), as the first chunk came with it.
  StreamReport(const Experiment& e, const schedule::Schedule& meta);
  // The same with bound-by, of a run on t under m; t and m must outlive it.
  StreamReport(const Experiment& e, const schedule::Schedule& meta, const topology::Topology& t,
               const cost::CostModel& m);
  // The next chunk, in op order; every op not yet added starts at or after safe_before;
  // groups: the Schedule's so far.
  // descs: the chunk's entries, which its ops name (Op::desc).
  void add(std::span<const schedule::Op> ops, std::span<const schedule::OpDesc> descs, std::span<const double> start,
           std::span<const double> end, double safe_before, std::span<const schedule::Group> groups = {});
  // After the last chunk, with the run's critical path (nullopt: not traced) and
  // each link's transfer; bound_by needs both (and the constructor's topology).
  StepReport finish(const std::optional<std::vector<schedule::PathLink>>& critical_chain,
                    const std::vector<schedule::PathTransfer>& transfers = {});

  int64_t intervals_held() const { return held_; }

 private:
  void sweep(double below);  // feeds each rank's intervals that start before `below`

  const Experiment& e_;
  int ranks_ = 0, replicas_ = 1;
  std::vector<std::vector<signed char>> stream_kind_;  // per rank, per stream: 1 compute, 0 communication
  bool any_op_ = false;
  double begin_ = 0, end_ = 0;
  double mask_fwd_flops_ = 0, executed_flops_ = 0;
  struct Row {
    std::vector<double> planned, measured;  // per rank
  };
  std::map<std::pair<int, int>, Row> rows_;  // forward attention work by (layer, step)
  struct RankUnion {
    std::vector<core::Interval> compute, any;  // not yet swept
    core::UnionSweep compute_sweep, any_sweep;
  };
  std::vector<RankUnion> union_;
  int64_t held_ = 0, sweep_at_ = 1 << 20;
  std::optional<StreamBoundBy> bound_by_;
};

}  // namespace rm::report
