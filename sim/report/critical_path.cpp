#include "sim/report/critical_path.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "sim/schedule/comm_matching.hpp"

namespace rm::report {

using schedule::Op;
using schedule::OpId;
using schedule::OpKind;
using schedule::Phase;
using traces::Event;

namespace {

// What the start of each op waited for, in the engines' semantics (engine.hpp):
// a stream launches runs (an op plus the p2p ops joined to it) in id order, a
// run once every op of it has its deps ended and the previous run has ended.
class StartConstraints {
 public:
  explicit StartConstraints(const schedule::Schedule& s) : s_(s), match_(schedule::match_comms(s)) {
    run_of_.resize(s.ops.size());
    std::map<std::pair<int, int>, int64_t> last_run;  // per (rank, stream)
    for (const Op& op : s.ops) {
      auto [it, fresh] = last_run.try_emplace({op.rank, op.stream}, -1);
      if (fresh || !op.joined) {
        prev_run_.push_back(it->second);
        runs_.emplace_back();
        it->second = int64_t(runs_.size()) - 1;
      }
      runs_[size_t(it->second)].push_back(op.id);
      run_of_[size_t(op.id)] = it->second;
    }
  }

  // The op's own constraints: the deps of its run, and the previous run's ops.
  template <class F>
  void local(OpId op, F&& f) const {
    const int64_t run = run_of_[size_t(op)];
    for (OpId x : runs_[size_t(run)])
      for (OpId d : s_.ops[size_t(x)].deps) f(d);
    if (prev_run_[size_t(run)] >= 0)
      for (OpId x : runs_[size_t(prev_run_[size_t(run)])]) f(x);
  }

  // The ops whose posting a transfer of `op` also waits for.
  std::vector<OpId> partners(OpId op) const {
    std::vector<OpId> out;
    if (OpId p = match_.partner[size_t(op)]; p >= 0) out.push_back(p);
    if (int64_t c = match_.call_of[size_t(op)]; c >= 0)
      for (OpId m : match_.calls[size_t(c)])
        if (m >= 0 && m != op) out.push_back(m);
    return out;
  }

 private:
  const schedule::Schedule& s_;
  schedule::CommMatching match_;
  std::vector<int64_t> run_of_, prev_run_;
  std::vector<std::vector<OpId>> runs_;
};

}  // namespace

CriticalPath critical_path(const schedule::Schedule& s, const std::vector<const Event*>& ev) {
  CriticalPath cp;
  OpId cur = -1;
  for (const Op& op : s.ops)
    if (ev[size_t(op.id)] && (cur < 0 || ev[size_t(op.id)]->end_s > ev[size_t(cur)]->end_s)) cur = op.id;
  if (cur < 0) return cp;

  const StartConstraints sc(s);
  std::vector<char> on_path(s.ops.size(), 0);
  std::map<std::pair<OpKind, Phase>, CriticalPathShare> shares;
  auto visit = [&](OpId op, double seconds) {
    on_path[size_t(op)] = 1;
    cp.ops.push_back(op);
    const Op& o = s.ops[size_t(op)];
    auto& sh = shares[{o.kind, o.phase}];
    sh.kind = o.kind;
    sh.phase = o.phase;
    sh.seconds += seconds;
    ++sh.ops;
    (schedule::is_compute(o.kind) ? cp.compute_s : cp.communication_s) += seconds;
  };

  const double t_end = ev[size_t(cur)]->end_s;
  double t = t_end;  // the path covers [t, t_end] so far
  for (;;) {
    // The latest-ending constraint of cur or of a partner (cur's own first on ties).
    OpId best = -1, via = -1;
    double best_end = 0;
    auto consider = [&](OpId through) {
      sc.local(through, [&](OpId p) {
        if (p < 0 || size_t(p) >= ev.size()) return;  // a dangling dep of an unvalidated Schedule
        const Event* e = ev[size_t(p)];
        if (!e || on_path[size_t(p)] || (best >= 0 && e->end_s <= best_end)) return;
        best = p;
        via = through;
        best_end = e->end_s;
      });
    };
    consider(cur);
    for (OpId m : sc.partners(cur))
      if (!on_path[size_t(m)]) consider(m);

    const double start = std::min(ev[size_t(cur)]->start_s, t);
    if (best < 0) {
      visit(cur, t - start);
      t = start;
      break;
    }
    const double ready = std::min(best_end, t);
    // A partner's constraint can end after cur was posted: the transfer ran from then.
    visit(cur, t - std::max(start, ready));
    cp.waiting_s += std::max(0.0, start - ready);
    if (via != cur) visit(via, 0.0);
    t = ready;
    cur = best;
  }
  cp.length_s = t_end - t;
  std::reverse(cp.ops.begin(), cp.ops.end());
  for (auto& [key, sh] : shares) cp.by_kind.push_back(sh);
  std::stable_sort(cp.by_kind.begin(), cp.by_kind.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return cp;
}

}  // namespace rm::report
