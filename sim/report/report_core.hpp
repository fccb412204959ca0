// The parts of the step report and of bound-by that the Timeline form
// (make_step_report, bound_by on a Timeline) and the op-times form
// (fast_report.hpp) share, so each figure is computed by one piece of code
// whichever form fed it. Internal to sim/report.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/cost/collective_plan.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/report/op_spans.hpp"
#include "sim/report/step_report.hpp"
#include "sim/schedule/call_shape.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"

namespace rm::report::core {

using Interval = std::pair<double, double>;

// Sorts v; in linear time when it is a few sorted runs, as a Timeline's events
// (and fast_step_report's op times) give it: stream by stream, each in
// (start, end) order. Equal intervals are interchangeable, so the result is
// the one std::sort gives.
void sort_intervals(std::vector<Interval>& v);

// The ops the attention imbalance reads (forward attention, phase forward) and
// each one's work: its tiles, or its FLOPs when it has none (step_report.hpp).
inline bool is_forward_attention(const schedule::Op& op) {
  return op.kind == schedule::OpKind::attn_fwd && op.phase == schedule::Phase::forward;
}
inline double attention_work(const schedule::OpDesc& d) { return d.blocks > 0 ? double(d.blocks) : d.flops; }

// The length of a union of intervals fed in sorted order (sort_intervals'),
// one at a time: what union_length sums, kept open between feeds so that a
// streamed run (stream_report.hpp) sums the same lengths in the same order.
struct UnionSweep {
  double total = 0, lo = 0, hi = 0;
  bool open = false;
  void add(const Interval& x) {
    if (open && x.first <= hi) {
      hi = std::max(hi, x.second);
      return;
    }
    if (open) total += hi - lo;
    lo = x.first, hi = x.second, open = true;
  }
  // union_length's sum: the pieces' ends added, then their starts taken.
  double length() const { return open ? total + hi - lo : total; }
  // bound_by's length(merged(...)): each disjoint piece's (hi - lo) added in
  // turn. The last bit can differ from length(); each form keeps its own.
  double length_by_pieces() const { return open ? total + (hi - lo) : total; }
};

// {worker, step} ratios as imbalance.hpp defines them, of the work of `rows`
// rows keyed (layer, step) ascending: layer_of(k) is row k's layer, row_of(k)
// its `ranks` values. Sums of maxima over sums of means.
template <class LayerOf, class RowOf>
std::pair<double, double> ratios(size_t rows, LayerOf&& layer_of, RowOf&& row_of, size_t ranks) {
  std::map<int, std::vector<double>> per_layer;
  double step_max = 0, total = 0;
  for (size_t k = 0; k < rows; ++k) {
    const double* w = row_of(k);
    auto& l = per_layer.try_emplace(layer_of(k), ranks, 0.0).first->second;
    for (size_t r = 0; r < ranks; ++r) l[r] += w[r];
    step_max += *std::max_element(w, w + ranks);
  }
  double worker_max = 0;
  for (const auto& [layer, w] : per_layer) {
    worker_max += *std::max_element(w.begin(), w.end());
    for (double x : w) total += x;
  }
  const double mean = total / double(ranks);
  if (mean <= 0) return {1, 1};
  return {worker_max / mean, step_max / mean};
}

// Per rank: the intervals of its compute streams and of all its streams (both sorted in place).
Breakdown breakdown(std::vector<std::vector<Interval>>& compute, std::vector<std::vector<Interval>>& any, double step);
// The same from each rank's union lengths: {compute streams, all streams}.
Breakdown breakdown(const std::vector<std::pair<double, double>>& compute_and_busy, double step);

// Imbalance from the Schedule's sums and the ops' measured durations.
Imbalance imbalance(const StepSums& sums, const OpSpans& t, size_t ranks);

// GPUs (ranks x replicas), step time, FLOPs, tokens/s, MFU, HFU and memory, from
// the sums over the ops (StepSums::mask_attention_fwd_flops, ::executed_flops).
void fill_figures(StepReport& r, const Experiment& e, int ranks, int replicas, double mask_attention_fwd_flops,
                  double executed_flops, double step_time_s);
// Step time, FLOPs, tokens/s, MFU, HFU, imbalance and memory: everything but the breakdown and the critical path.
void fill_totals(StepReport& r, const Experiment& e, const schedule::Schedule& s, const StepSums& sums,
                 const OpSpans& t, double step_time_s);

// Per rank: every compute interval; per rank and phase: compute and communication intervals.
struct PhaseIntervals {
  explicit PhaseIntervals(size_t ranks) : compute(ranks), phase_compute(ranks), phase_comm(ranks) {}
  std::vector<std::vector<Interval>> compute;
  std::vector<std::array<std::vector<Interval>, schedule::kPhaseCount>> phase_compute, phase_comm;
  std::array<bool, schedule::kPhaseCount> seen{};
};

// bound_by's transfers as far as the Schedule alone says (FlowPlan), and the rest.
struct FlowTemplate {
  schedule::OpId a = -1, b = -1;  // the ops whose starts and ends bound it (a send/recv pair; a call's sender, receiver)
  int64_t call = -1;              // index into CommMatching::calls for a collective's transfer, else -1
  int src_rank = 0, dst_rank = 0;
  double bytes = 0;
  schedule::Phase phase = schedule::Phase::forward;
  bool ring = false;
  // A replica-symmetric Schedule's collective over a group spanning replicas:
  // b's translate in replica dst_replica receives (a is in replica 0).
  int dst_replica = 0;
  bool spanning = false;
};
struct FlowPlan {
  std::vector<FlowTemplate> flows;  // p2p in op order, then each call's (sender, receiver) pairs
  std::vector<std::vector<schedule::OpId>> calls;  // CommMatching::calls
};
FlowPlan flow_plan(const schedule::Schedule& s, const schedule::CommMatching& match);

// The union length of intervals fed in start order, as a running merge.
struct IntervalUnion {
  double lo = 0, hi = 0, total = 0;
  bool open = false;
  void add(double a, double b) {
    if (open && a <= hi) {
      hi = std::max(hi, b);
      return;
    }
    if (open) total += hi - lo;
    lo = a, hi = b, open = true;
  }
  // union_length's sum: the pieces' ends added, then their starts taken.
  double length() const { return open ? total + hi - lo : total; }
  // bound_by's length(merged(...)): each disjoint piece's (hi - lo) added in
  // turn. The last bit can differ from length(); each form keeps its own.
  double length_by_pieces() const { return open ? total + (hi - lo) : total; }
};

// One link's transfers: bytes and the unions of their intervals.
struct LinkAcc {
  double bytes = 0, ring_bytes = 0;
  std::array<double, schedule::kPhaseCount> phase_bytes{};
  IntervalUnion busy, critical, ring;
  std::array<IntervalUnion, schedule::kPhaseCount> phase_busy;
};

// What bound_by reads of op times and routes, before any link rate: a point
// with the same op times on the same routes (a cluster what-if whose engine
// run repeated the last: engine::AnalyticReuse) finishes bound_by from it
// under its own rates, figure for figure what the whole computation gives.
struct LinkTraffic {
  struct RouteUse {
    int src_gpu = 0, dst_gpu = 0;
    std::vector<int> links;  // Topology::route's
    bool inter_node = false;
  };
  std::vector<RouteUse> routes;  // each GPU pair the transfers used, in first use
  size_t links = 0;              // the Topology's link count
  std::vector<LinkAcc> acc;      // per link
  std::array<double, 2> class_bytes{};       // intra-node, inter-node
  std::array<std::vector<char>, 2> uses;     // per class and link: some route of the class crosses it
  // A replica-symmetric Schedule's transfer runs in every replica on translated
  // GPUs: each transfer names a route set, the routes of replica 0's and of its
  // translates, `replicas` entries each (one with no shortcut), so a translate
  // costs 4 bytes here rather than a transfer record of its own.
  int replicas = 1;
  std::vector<int32_t> route_sets;                  // [set * replicas + k]: index into routes
  std::vector<std::pair<int32_t, double>> counted;  // the transfers counted, in start order: route set, bytes
  // A streamed run sums what `counted` would give as it goes (it cannot keep
  // every transfer): per class, the bytes each link kind caps (kLinkKinds order).
  std::optional<std::array<std::array<double, 4>, 2>> capped;
  std::vector<PhaseBound> phases;
};

// Link kinds in the order the notes list them; a link's kind and effective rate.
inline const std::array<std::string, 4> kLinkKinds{"fabric", "nic", "nvlink", "pcie"};
struct LinkRates {
  std::vector<std::string> kind;   // link_kind's
  std::vector<uint8_t> kind_id;    // index into kLinkKinds
  std::vector<double> rate;        // CostModel::link_rate_Bps
};
LinkRates link_rates(const topology::Topology& t, const cost::CostModel& m);
// The kind (kLinkKinds index) of a route's slowest effective link: what caps a transfer on it (first on ties).
uint8_t slowest_kind(const std::vector<int>& route, const LinkRates& r);

// The numbering of route sets, one for both forms of bound_by: a transfer from
// src_rank to dst_rank's translate dst_k replicas on names one set, its GPU pair's
// route in every replica; sets are numbered in first use. gpu_of_rank: replica
// 0's ranks; replicas and ranks_per_replica: the Schedule's symmetry (1 and any:
// none). Each caller keeps the sets' routes its own way.
class RouteSetIndex {
 public:
  RouteSetIndex(std::vector<int> gpu_of_rank, int replicas, int ranks_per_replica);
  // The set's number, and whether this call made it (the caller then adds its
  // routes, replica by replica: gpus(src_rank, dst_rank, dst_k, k) for k < replicas()).
  std::pair<int32_t, bool> find(int src_rank, int dst_rank, int dst_k);
  // The (source, destination) GPUs of that transfer in replica k, translated by k replicas.
  std::pair<int, int> gpus(int src_rank, int dst_rank, int dst_k, int k) const {
    return {gpu(src_rank, k), gpu(dst_rank, k + dst_k)};
  }
  int replicas() const { return replicas_; }

 private:
  int gpu(int rank, int k) const {
    const int g = gpu_[size_t(rank)];
    return k == 0 ? g : (g + k * shift_) % (replicas_ * shift_);
  }
  std::vector<int> gpu_;
  int replicas_, shift_;
  std::unordered_map<uint64_t, int32_t> set_of_;
  // A rank's consecutive sends mostly go to one peer: the last set is kept.
  uint64_t last_key_ = ~uint64_t(0);
  int32_t last_ = -1;
};

// Routes of the GPU pairs transfers use and their route sets (RouteSetIndex's
// numbering), each numbered in first use, into tr.routes and tr.route_sets.
class RouteSets {
 public:
  RouteSets(const topology::Topology& t, std::vector<int> gpu_of_rank, int replicas, int ranks_per_replica,
            LinkTraffic& tr);
  // The route set of a transfer from src_rank to dst_rank's translate dst_k replicas on.
  int32_t set(int src_rank, int dst_rank, int dst_k);

 private:
  int32_t route(int src_gpu, int dst_gpu);
  const topology::Topology& t_;
  RouteSetIndex index_;
  LinkTraffic& tr_;
  std::unordered_map<uint64_t, int32_t> route_of_;
};

// A collective call's transfers as bound_by counts them: one per (sender,
// receiver) member pair, the bytes of the plan's transfers between them summed
// in plan order, pairs in (sender, receiver) order. dst may name a member of
// another replica (dst / members) for a call spanning replicas.
struct CallPair {
  int src, dst;
  double bytes;
};
class CallPairs {
 public:
  // Planned once per shape: a step repeats a few shapes over hundreds of calls.
  const std::vector<CallPair>& of(const schedule::CallShapeKey& key);

 private:
  std::map<schedule::CallShapeKey, std::vector<CallPair>> shapes_;
  std::vector<uint32_t> order_;
};

// Per rank and phase: its compute's union length and its exposed communication
// (what the phase's communication adds to the union of all the rank's compute).
struct PhaseFigures {
  explicit PhaseFigures(size_t ranks) : compute(ranks), exposed(ranks) {}
  std::vector<std::array<double, schedule::kPhaseCount>> compute, exposed;
  std::array<bool, schedule::kPhaseCount> seen{};
};
std::vector<PhaseBound> phase_bounds(const PhaseFigures& f, const CriticalPath& cp);
LinkTraffic link_traffic(const schedule::Schedule& s, const FlowPlan& fp, const OpSpans& times, PhaseIntervals& phases,
                         const topology::Topology& t, const CriticalPath& cp);
// Whether t has tr's link count and, for each GPU pair of tr, the route tr counted on.
bool same_routes(const LinkTraffic& tr, const topology::Topology& t);
BoundBy bound_by(const LinkTraffic& tr, const topology::Topology& t, const cost::CostModel& m, const CriticalPath& cp,
                 double step, double step_imbalance);

// bound_by from op times: step = the makespan the verdict reads.
BoundBy bound_by(const schedule::Schedule& s, const FlowPlan& fp, const OpSpans& times, double step,
                 PhaseIntervals& phases, const topology::Topology& t, const cost::CostModel& m,
                 const CriticalPath& cp, double step_imbalance);

}  // namespace rm::report::core
