#include "sim/report/step_report.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "sim/cost/model_flops.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/report/report_core.hpp"

namespace rm::report {

using schedule::Op;
using schedule::OpId;
using schedule::OpKind;
using schedule::Phase;
using traces::Event;

namespace {

using Interval = std::pair<double, double>;

// Length of the union of the intervals (sorted in place).
double union_length(std::vector<Interval>& v) {
  core::sort_intervals(v);
  core::UnionSweep u;
  for (const Interval& x : v) u.add(x);
  return u.length();
}

// A Timeline's events per rank (those on a stream the Schedule has, of any op or none).
Breakdown breakdown(const schedule::Schedule& s, const traces::Timeline& tl, double step) {
  const size_t R = s.ranks.size();
  std::vector<std::vector<Interval>> compute(R), any(R);
  for (const Event& ev : tl.events) {
    const schedule::Stream* st = s.find_stream(ev.rank, ev.stream);
    if (!st) continue;
    any[size_t(ev.rank)].emplace_back(ev.start_s, ev.end_s);
    if (st->kind == schedule::StreamKind::compute) compute[size_t(ev.rank)].emplace_back(ev.start_s, ev.end_s);
  }
  return core::breakdown(compute, any, step);
}

std::pair<double, double> row_ratios(const std::vector<std::pair<int, int>>& rows, const std::vector<double>& work,
                                 size_t ranks) {
  return core::ratios(
      rows.size(), [&](size_t k) { return rows[k].first; }, [&](size_t k) { return work.data() + k * ranks; }, ranks);
}

}  // namespace

StepSums step_sums(const Experiment& e, const schedule::Schedule& s) {
  StepSums sums;
  sums.mask_attention_fwd_flops = cost::mask_attention_fwd_flops(s);
  for (const Op& op : s.ops)
    if (schedule::is_compute(op.kind))
      sums.executed_flops += cost::executed_flops(op, s.desc(op), e.workload.block_q, e.workload.block_k, e.model.head_dim);
  // Forward attention ops by (layer, step): the rows, then each op's row
  // (ops of one row mostly come together: the last row is tried first).
  for (const Op& op : s.ops)
    if (core::is_forward_attention(op)) sums.rows.emplace_back(op.layer, std::max(op.step, 0));
  std::sort(sums.rows.begin(), sums.rows.end());
  sums.rows.erase(std::unique(sums.rows.begin(), sums.rows.end()), sums.rows.end());
  const size_t R = s.ranks.size();
  std::vector<double> planned(sums.rows.size() * R, 0.0);
  int row = -1;
  for (const Op& op : s.ops) {
    if (!core::is_forward_attention(op)) continue;
    const std::pair<int, int> key{op.layer, std::max(op.step, 0)};
    if (row < 0 || sums.rows[size_t(row)] != key)
      row = int(std::lower_bound(sums.rows.begin(), sums.rows.end(), key) - sums.rows.begin());
    sums.attention.push_back({op.id, op.rank, row});
    planned[size_t(row) * R + size_t(op.rank)] += core::attention_work(s.desc(op));
  }
  if (R > 0) std::tie(sums.worker, sums.step) = row_ratios(sums.rows, planned, R);
  return sums;
}

namespace core {

void sort_intervals(std::vector<Interval>& v) {
  constexpr size_t kMaxRuns = 16;
  std::vector<size_t> starts{0};
  for (size_t i = 1; i < v.size() && starts.size() <= kMaxRuns; ++i)
    if (v[i] < v[i - 1]) starts.push_back(i);
  if (starts.size() > kMaxRuns) {
    std::sort(v.begin(), v.end());
    return;
  }
  starts.push_back(v.size());
  for (size_t k = 1; k + 1 < starts.size(); ++k)
    std::inplace_merge(v.begin(), v.begin() + std::ptrdiff_t(starts[k]), v.begin() + std::ptrdiff_t(starts[k + 1]));
}

Breakdown breakdown(std::vector<std::vector<Interval>>& compute, std::vector<std::vector<Interval>>& any, double step) {
  std::vector<std::pair<double, double>> busy;
  for (size_t r = 0; r < compute.size(); ++r) busy.emplace_back(union_length(compute[r]), union_length(any[r]));
  return breakdown(busy, step);
}

Breakdown breakdown(const std::vector<std::pair<double, double>>& compute_and_busy, double step) {
  const size_t R = compute_and_busy.size();
  Breakdown b;
  for (size_t r = 0; r < R; ++r) {
    // Exposed communication is what the union of all streams adds to the compute union.
    const auto [c, busy] = compute_and_busy[r];
    b.per_rank.push_back({int(r), c, busy - c, std::max(0.0, step - busy)});
  }
  if (R == 0) return b;
  b.min = b.max = b.per_rank[0];
  for (const RankTime& t : b.per_rank) {
    b.mean.compute_s += t.compute_s / double(R);
    b.mean.exposed_comm_s += t.exposed_comm_s / double(R);
    b.mean.idle_s += t.idle_s / double(R);
    b.min = {-1, std::min(b.min.compute_s, t.compute_s), std::min(b.min.exposed_comm_s, t.exposed_comm_s),
             std::min(b.min.idle_s, t.idle_s)};
    b.max = {-1, std::max(b.max.compute_s, t.compute_s), std::max(b.max.exposed_comm_s, t.exposed_comm_s),
             std::max(b.max.idle_s, t.idle_s)};
  }
  return b;
}

Imbalance imbalance(const StepSums& sums, const OpSpans& t, size_t ranks) {
  if (ranks == 0) return {};
  std::vector<double> measured(sums.rows.size() * ranks, 0.0);
  for (const StepSums::AttentionOp& a : sums.attention) {
    const size_t i = size_t(a.id);
    measured[size_t(a.row) * ranks + size_t(a.rank)] += t.has_op(i) ? t.end[i] - t.start[i] : 0.0;
  }
  return {sums.worker, sums.step, row_ratios(sums.rows, measured, ranks).second};
}

void fill_figures(StepReport& r, const Experiment& e, int ranks, int replicas, double mask_attention_fwd_flops,
                  double executed_flops, double step_time_s) {
  // A replica-symmetric Schedule holds one of `replicas` identical replicas
  // (schedule.hpp, ReplicaSymmetry): GPUs and FLOPs count all of them.
  r.gpus = ranks * replicas;
  r.step_time_s = step_time_s;
  r.scope = e.scope;
  r.model_flops = cost::model_flops(e, mask_attention_fwd_flops * replicas).total();
  r.dense_causal_model_flops = cost::dense_causal_model_flops(e).total();
  if (r.model_flops > 0) r.dense_equivalent_speedup = r.dense_causal_model_flops / r.model_flops;
  r.executed_flops = executed_flops * replicas;
  if (r.step_time_s > 0) {
    const double tokens = double(e.parallel.dp) * e.workload.batch * double(e.workload.seq_len);
    r.tokens_per_s = tokens / r.step_time_s;
    const double peak = r.step_time_s * r.gpus * e.cluster.gpu.peak_tflops_bf16 * 1e12;
    if (peak > 0) {
      r.mfu = r.model_flops / peak;
      r.hfu = r.executed_flops / peak;
    }
  }
  r.memory = memory::estimate_memory(e);
}

void fill_totals(StepReport& r, const Experiment& e, const schedule::Schedule& s, const StepSums& sums,
                 const OpSpans& t, double step_time_s) {
  fill_figures(r, e, int(s.ranks.size()), s.symmetry.replicas, sums.mask_attention_fwd_flops, sums.executed_flops,
               step_time_s);
  r.imbalance = imbalance(sums, t, s.ranks.size());
}

}  // namespace core

StepReport make_step_report(const Experiment& e, const schedule::Schedule& s, const traces::Timeline& tl) {
  StepReport r;
  const OpSpans t = spans_of(s, tl);
  core::fill_totals(r, e, s, step_sums(e, s), t, tl.makespan_s());
  r.breakdown = breakdown(s, tl, r.step_time_s);
  r.critical_path = critical_path(s, EdgeGraph(tl.edges, s.ops.size()), t);
  return r;
}

namespace {

nlohmann::json rank_json(const RankTime& t) {
  nlohmann::json j{{"compute_s", t.compute_s}, {"exposed_comm_s", t.exposed_comm_s}, {"idle_s", t.idle_s}};
  if (t.rank >= 0) j["rank"] = t.rank;
  return j;
}

}  // namespace

nlohmann::json to_json(const StepReport& r) {
  nlohmann::json per_rank = nlohmann::json::array();
  for (const RankTime& t : r.breakdown.per_rank) per_rank.push_back(rank_json(t));
  nlohmann::json by_kind = nlohmann::json::array();
  for (const auto& sh : r.critical_path.by_kind)
    by_kind.push_back({{"kind", schedule::to_string(sh.kind)},
                       {"phase", schedule::to_string(sh.phase)},
                       {"seconds", sh.seconds},
                       {"ops", sh.ops}});
  const CriticalPath& cp = r.critical_path;
  nlohmann::json j = {
      {"step_time_s", r.step_time_s},
      {"tokens_per_s", r.tokens_per_s},
      {"gpus", r.gpus},
      {"flops",
       {{"model", r.model_flops}, {"dense_causal_model", r.dense_causal_model_flops}, {"executed", r.executed_flops}}},
      {"mfu", r.mfu},
      {"hfu", r.hfu},
      {"dense_equivalent_speedup", r.dense_equivalent_speedup},
      {"breakdown",
       {{"per_rank", per_rank},
        {"mean", rank_json(r.breakdown.mean)},
        {"min", rank_json(r.breakdown.min)},
        {"max", rank_json(r.breakdown.max)}}},
      {"imbalance",
       {{"worker", r.imbalance.worker}, {"step", r.imbalance.step}, {"step_measured", r.imbalance.step_measured}}},
      {"critical_path",
       {{"length_s", cp.length_s},
        {"ops", cp.ops.size()},
        {"op_ids", cp.ops},
        {"compute_s", cp.compute_s},
        {"communication_s", cp.communication_s},
        {"waiting_s", cp.waiting_s},
        {"by_kind", by_kind}}},
      {"memory", memory::to_json(r.memory)},
  };
  if (!r.critical_path_traced) j["critical_path"] = nullptr;
  if (r.bound_by) j["bound_by"] = to_json(*r.bound_by);
  return j;
}

namespace {

// Above kTextRanks ranks the table shows the slowest few and min / mean / max.
constexpr size_t kTextRanks = 8;
constexpr size_t kTextSlowestRanks = 3;
constexpr size_t kTextPathKinds = 10;

// Every duration of a report in one unit, the one that suits its step time, so columns compare.
struct Unit {
  double per_s;
  const char* name;
  std::string operator()(double s) const { return fmt::format("{:.3f} {}", s * per_s, name); }
};
Unit unit_for(double step) {
  if (step >= 1) return {1, "s"};
  if (step >= 1e-3) return {1e3, "ms"};
  return {1e6, "us"};
}

std::string pct(double part, double whole) { return fmt::format("{:.1f}%", whole > 0 ? 100 * part / whole : 0.0); }

// The first `left` columns left-aligned (names), the others right-aligned (numbers), two spaces apart.
std::string table(const std::vector<std::vector<std::string>>& rows, size_t left = 1) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i)
      line += (i == 0 ? "" : "  ") +
              (i < left ? fmt::format("{:<{}}", row[i], width[i]) : fmt::format("{:>{}}", row[i], width[i]));
    out += line + '\n';
  }
  return out;
}

std::vector<std::string> rank_row(const std::string& name, const RankTime& t, double step, const Unit& secs) {
  return {name, secs(t.compute_s), secs(t.exposed_comm_s), secs(t.idle_s), pct(t.idle_s, step)};
}

}  // namespace

std::string to_text(const StepReport& r) {
  const Unit secs = unit_for(r.step_time_s);
  std::string out;
  out += fmt::format("step time      {}\n", secs(r.step_time_s));
  // A narrow scope's tokens/s is the rate of what it holds, not a training throughput: say which.
  if (r.scope == Scope::step)
    out += fmt::format("tokens/s       {:.0f}\n", r.tokens_per_s);
  else
    out += fmt::format("tokens/s       {:.0f} per {} (scope {}: not a training throughput)\n", r.tokens_per_s,
                       r.scope == Scope::layer ? "layer (forward and backward)"
                       : r.scope == Scope::attention_fwd ? "attention call (forward)"
                                                         : "attention call (forward and backward)",
                       to_string(r.scope));
  out += fmt::format("MFU            {:.1f}% ({:.3g} model FLOPs of the mask's non-zeros on {} GPUs)\n", 100 * r.mfu,
                     r.model_flops, r.gpus);
  out += fmt::format("HFU            {:.1f}% ({:.3g} FLOPs executed: whole tiles, recomputation)\n", 100 * r.hfu,
                     r.executed_flops);
  out += fmt::format("speed-up       {:.2f}x dense-equivalent (dense causal attention: {:.3g} model FLOPs)\n\n",
                     r.dense_equivalent_speedup, r.dense_causal_model_flops);

  const Breakdown& b = r.breakdown;
  std::vector<std::vector<std::string>> rows{{"rank", "compute", "exposed comm", "idle", "idle %"}};
  if (b.per_rank.size() <= kTextRanks) {
    for (const RankTime& t : b.per_rank) rows.push_back(rank_row(std::to_string(t.rank), t, r.step_time_s, secs));
  } else {
    // The ranks that set the step: the busiest (least idle), lowest id on ties.
    std::vector<RankTime> slow = b.per_rank;
    std::stable_sort(slow.begin(), slow.end(), [](const auto& x, const auto& y) { return x.idle_s < y.idle_s; });
    for (size_t i = 0; i < kTextSlowestRanks; ++i)
      rows.push_back(rank_row(fmt::format("{} (slowest {})", slow[i].rank, i + 1), slow[i], r.step_time_s, secs));
    rows.push_back(rank_row("min", b.min, r.step_time_s, secs));
  }
  rows.push_back(rank_row("mean", b.mean, r.step_time_s, secs));
  rows.push_back(rank_row("max", b.max, r.step_time_s, secs));
  out += fmt::format("per-rank time ({} ranks; columns add up to the step time)\n{}\n", b.per_rank.size(), table(rows));

  out += "attention imbalance (forward attention ops; 1 = balanced)\n";
  out += table({{"worker-level, planned (max/mean of rank totals)", fmt::format("{:.3f}", r.imbalance.worker)},
                {"step-level, planned (sum of step max / sum of step mean)", fmt::format("{:.3f}", r.imbalance.step)},
                {"step-level, on the Timeline's durations", fmt::format("{:.3f}", r.imbalance.step_measured)}});

  const CriticalPath& cp = r.critical_path;
  if (!r.critical_path_traced) {
    out += "\ncritical path  not traced: the streamed run could not tell it apart from ties; simulate it whole\n";
  } else {
    out += fmt::format("\ncritical path  {} over {} ops: compute {} ({}), communication {} ({}), waiting {} ({})\n",
                       secs(cp.length_s), cp.ops.size(), secs(cp.compute_s), pct(cp.compute_s, cp.length_s),
                       secs(cp.communication_s), pct(cp.communication_s, cp.length_s), secs(cp.waiting_s),
                       pct(cp.waiting_s, cp.length_s));
    std::vector<std::vector<std::string>> kinds{{"kind", "phase", "time", "share", "ops"}};
    for (size_t i = 0; i < cp.by_kind.size() && i < kTextPathKinds; ++i) {
      const auto& sh = cp.by_kind[i];
      kinds.push_back({std::string(schedule::to_string(sh.kind)), std::string(schedule::to_string(sh.phase)),
                       secs(sh.seconds), pct(sh.seconds, cp.length_s), std::to_string(sh.ops)});
    }
    out += table(kinds, 2);
    if (cp.by_kind.size() > kTextPathKinds)
      out += fmt::format("  ({} more kind/phase pairs in the JSON)\n", cp.by_kind.size() - kTextPathKinds);
  }
  if (r.bound_by) {
    out += '\n';
    out += to_text(*r.bound_by, r.step_time_s);
  }
  out += '\n';
  out += memory::to_text(r.memory);
  return out;
}

}  // namespace rm::report
