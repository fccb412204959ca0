#include "sim/report/stream_report.hpp"

#include <algorithm>

#include "sim/cost/model_flops.hpp"

namespace rm::report {

StreamReport::StreamReport(const Experiment& e, const schedule::Schedule& meta)
    : e_(e), ranks_(int(meta.ranks.size())), replicas_(meta.symmetry.replicas), union_(meta.ranks.size()) {
  for (const auto& r : meta.ranks) {
    auto& kinds = stream_kind_.emplace_back();
    for (const auto& st : r.streams) kinds.push_back(st.kind == schedule::StreamKind::compute ? 1 : 0);
  }
}

StreamReport::StreamReport(const Experiment& e, const schedule::Schedule& meta, const topology::Topology& t,
                           const cost::CostModel& m)
    : StreamReport(e, meta) {
  bound_by_.emplace(meta, t, m);
}

void StreamReport::add(std::span<const schedule::Op> ops, std::span<const schedule::OpDesc> descs,
                       std::span<const double> start, std::span<const double> end, double safe_before,
                       std::span<const schedule::Group> groups) {
  if (bound_by_) bound_by_->add(ops, descs, start, end, groups, safe_before);
  const size_t R = size_t(ranks_);
  for (size_t i = 0; i < ops.size(); ++i) {
    const schedule::Op& op = ops[i];
    const schedule::OpDesc& d = schedule::desc_in(descs, op);
    // The makespan as fast_step_report reads it.
    if (!any_op_) begin_ = start[i], end_ = end[i], any_op_ = true;
    begin_ = std::min(begin_, start[i]), end_ = std::max(end_, end[i]);
    // step_sums' two sums, in op order.
    const bool forward_attention = core::is_forward_attention(op);
    if (forward_attention) mask_fwd_flops_ += d.flops;
    if (schedule::is_compute(op.kind))
      executed_flops_ += cost::executed_flops(op, d, e_.workload.block_q, e_.workload.block_k, e_.model.head_dim);
    if (forward_attention) {
      Row& row = rows_[{op.layer, std::max(op.step, 0)}];
      if (row.planned.empty()) row.planned.assign(R, 0.0), row.measured.assign(R, 0.0);
      row.planned[size_t(op.rank)] += core::attention_work(d);
      row.measured[size_t(op.rank)] += end[i] - start[i];
    }
    // The breakdown's intervals (ops on streams their rank declares).
    const auto& kinds = stream_kind_[size_t(op.rank)];
    if (op.stream < 0 || size_t(op.stream) >= kinds.size()) continue;
    RankUnion& u = union_[size_t(op.rank)];
    const core::Interval x{start[i], end[i]};
    u.any.push_back(x);
    if (kinds[size_t(op.stream)] == 1) u.compute.push_back(x), ++held_;
    ++held_;
  }
  // Sweep when enough is held: what starts before safe_before is all there will ever be there.
  if (held_ >= sweep_at_) {
    sweep(safe_before);
    sweep_at_ = std::max<int64_t>(1 << 20, 2 * held_);
  }
}

void StreamReport::sweep(double below) {
  held_ = 0;
  auto feed = [&](std::vector<core::Interval>& v, core::UnionSweep& u) {
    std::sort(v.begin(), v.end());
    const auto cut = std::lower_bound(v.begin(), v.end(), core::Interval{below, -1e300});
    for (auto it = v.begin(); it != cut; ++it) u.add(*it);
    v.erase(v.begin(), cut);
    held_ += int64_t(v.size());
  };
  for (RankUnion& u : union_) {
    feed(u.compute, u.compute_sweep);
    feed(u.any, u.any_sweep);
  }
}

StepReport StreamReport::finish(const std::optional<std::vector<schedule::PathLink>>& critical_chain,
                                const std::vector<schedule::PathTransfer>& transfers) {
  sweep(1e300);
  StepReport r;
  core::fill_figures(r, e_, ranks_, replicas_, mask_fwd_flops_, executed_flops_, any_op_ ? end_ - begin_ : 0.0);
  const size_t R = size_t(ranks_);
  if (R > 0) {
    std::vector<const std::pair<const std::pair<int, int>, Row>*> rows;
    for (const auto& kv : rows_) rows.push_back(&kv);
    auto layer_of = [&](size_t k) { return rows[k]->first.first; };
    const auto planned = core::ratios(rows.size(), layer_of, [&](size_t k) { return rows[k]->second.planned.data(); }, R);
    const auto measured = core::ratios(rows.size(), layer_of, [&](size_t k) { return rows[k]->second.measured.data(); }, R);
    r.imbalance = {planned.first, planned.second, measured.second};
  }
  std::vector<std::pair<double, double>> busy;
  for (const RankUnion& u : union_) busy.emplace_back(u.compute_sweep.length(), u.any_sweep.length());
  r.breakdown = core::breakdown(busy, r.step_time_s);
  r.critical_path_traced = critical_chain.has_value();
  if (critical_chain) r.critical_path = critical_path(*critical_chain);
  if (bound_by_ && critical_chain)
    r.bound_by = bound_by_->finish(r.critical_path, *critical_chain, transfers, r.step_time_s, r.imbalance.step_measured);
  return r;
}

}  // namespace rm::report
