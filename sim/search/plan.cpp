#include "sim/search/plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "sim/generate/footprint.hpp"
#include "sim/topology/topology.hpp"

#include <fmt/format.h>

namespace rm::search {

namespace {

double tokens_of(const Experiment& e) {
  return double(e.parallel.dp) * e.workload.batch * double(e.workload.seq_len);
}

bool same_layout(const Layout& a, const Layout& b) { return layout_json(a) == layout_json(b); }

double recompute_s(const report::StepReport& r) {
  double s = 0;
  for (const auto& k : r.critical_path.by_kind)
    if (k.phase == schedule::Phase::recompute) s += k.seconds;
  return s;
}

int recompute_rank(Checkpoint c) { return c == Checkpoint::none ? 0 : c == Checkpoint::selective ? 1 : 2; }

// The K best distinct times per token of the simulated candidates (then
// enumeration order); a candidate whose time equals a kept one's to the bit
// is one of its equivalents (e.g. every ring kind inside one node), not a runner-up.
std::vector<size_t> best_k(std::vector<PlanCandidate>& c, size_t k) {
  std::vector<size_t> ok;
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].analytic.ok) ok.push_back(i);
  auto better = [&](size_t a, size_t b) {
    const double ta = c[a].analytic_time_per_token(), tb = c[b].analytic_time_per_token();
    if (ta != tb) return ta < tb;
    return c[a].index < c[b].index;
  };
  std::sort(ok.begin(), ok.end(), better);
  std::vector<size_t> top;
  for (size_t i : ok) {
    if (!top.empty() && c[i].analytic_time_per_token() == c[top.back()].analytic_time_per_token()) {
      c[top.back()].equivalents.push_back(c[i].layout);
      continue;
    }
    if (top.size() == k) break;
    top.push_back(i);
  }
  return top;
}

// The k best distinct times per token among outcomes, one point each (the
// first in index order): the screen keeps one of the layouts a layer cannot tell apart.
std::vector<size_t> best_of(const std::vector<Outcome>& out, const std::vector<double>& tokens, size_t k) {
  std::vector<size_t> ok;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].ok) ok.push_back(i);
  auto t = [&](size_t i) { return out[i].report.step_time_s / tokens[i]; };
  std::stable_sort(ok.begin(), ok.end(), [&](size_t a, size_t b) { return t(a) < t(b); });
  std::vector<size_t> top;
  for (size_t i : ok) {
    if (!top.empty() && t(i) == t(top.back())) continue;
    if (top.size() == k) break;
    top.push_back(i);
  }
  return top;
}

// Best-first branch and bound: simulates, a batch at a time, the points in
// order of their floor (seconds per token) while the floor is at most the
// k-th best time per token simulated so far (prune false: all of them).
// Points already done count as simulated. Returns how many it simulated.
int64_t best_first(const std::function<Experiment(size_t)>& make, const std::vector<double>& floor,
                   const std::vector<double>& tokens, std::vector<Outcome>& out, std::vector<char>& done, size_t k,
                   bool prune, int batch_size, const EvaluateOptions& eo,
                   const std::function<void(int64_t, int64_t)>& progress, double* final_bound = nullptr,
                   int64_t max_sims = 0, bool* budget_hit = nullptr, const std::vector<std::string>* groups = nullptr) {
  std::vector<size_t> order(floor.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return floor[a] < floor[b]; });
  // Under a budget, breadth first: the lowest floor of every group, then the
  // second of each, and so on (floors tie across a group's ring variants, and a
  // budget spent on one group would leave the others unseen). The order is then
  // not by floor, so points above the bound are skipped one by one.
  const bool by_group = groups && max_sims > 0;
  if (by_group) {
    std::map<std::string, int64_t> seen;
    std::vector<int64_t> rank(floor.size());
    for (size_t i : order) rank[i] = seen[(*groups)[i]]++;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  }
  std::set<double> best;  // the k best distinct times per token so far
  auto add = [&](size_t i) {
    if (!out[i].ok) return;
    best.insert(out[i].report.step_time_s / tokens[i]);
    if (best.size() > k) best.erase(std::prev(best.end()));
  };
  for (size_t i = 0; i < floor.size(); ++i)
    if (done[i]) add(i);
  int64_t simulated = 0;
  size_t next = 0;
  while (next < order.size()) {
    if (max_sims > 0 && simulated >= max_sims) {  // the budget: whole batches only, so it is deterministic
      if (budget_hit) *budget_hit = true;
      break;
    }
    const double bound = prune && best.size() >= k ? *best.rbegin() : std::numeric_limits<double>::infinity();
    std::vector<size_t> batch;
    while (next < order.size() && batch.size() < size_t(std::max(1, batch_size))) {
      const size_t i = order[next];
      if (floor[i] > bound && !by_group) break;  // and every later one: the order is by floor
      ++next;
      if (floor[i] > bound) continue;
      if (!done[i]) batch.push_back(i);
    }
    if (batch.empty()) {
      if (next < order.size()) break;  // the rest is above the k-th best
      continue;
    }
    std::vector<Experiment> run;
    for (size_t i : batch) run.push_back(make(i));  // built when simulated: the space holds layouts only
    std::vector<Outcome> r = evaluate(run, eo);
    for (size_t j = 0; j < batch.size(); ++j) {
      out[batch[j]] = std::move(r[j]);
      done[batch[j]] = 1;
      add(batch[j]);
    }
    simulated += int64_t(batch.size());
    progress(int64_t(next), int64_t(order.size()));
  }
  if (final_bound) *final_bound = prune && best.size() >= k ? *best.rbegin() : std::numeric_limits<double>::infinity();
  return simulated;
}

}  // namespace

std::string reason_lost(const PlanCandidate& c, const PlanCandidate& w) {
  const report::StepReport& a = (c.confirmed && c.simgrid.ok ? c.simgrid : c.analytic).report;
  const report::StepReport& b = (w.confirmed && w.simgrid.ok ? w.simgrid : w.analytic).report;
  // Per data-parallel replica: a dp = 2 step carries twice the tokens of a dp = 1 step.
  const double fa = 1.0 / c.layout.dp, fb = 1.0 / w.layout.dp;
  const bool per_seq = c.layout.dp > 1 || w.layout.dp > 1;
  const char* unit = per_seq ? "per rank and data-parallel replica" : "per rank";
  const double d_total = a.step_time_s * fa - b.step_time_s * fb;
  if (d_total <= 0) return "ties with the winner";
  const double d_comm = a.breakdown.mean.exposed_comm_s * fa - b.breakdown.mean.exposed_comm_s * fb;
  const double d_idle = a.breakdown.mean.idle_s * fa - b.breakdown.mean.idle_s * fb;
  const double d_recompute = recompute_s(a) * fa - recompute_s(b) * fb;
  const double d_compute = a.breakdown.mean.compute_s * fa - b.breakdown.mean.compute_s * fb;
  struct Cause {
    double s;
    std::string what;
  };
  std::vector<Cause> causes = {
      {d_comm, fmt::format("exposed communication +{:.3g} s ({:.4g} s vs {:.4g} s {})", d_comm,
                           a.breakdown.mean.exposed_comm_s * fa, b.breakdown.mean.exposed_comm_s * fb, unit)},
      {d_idle, fmt::format("imbalance: ranks idle +{:.3g} s (worker imbalance {:.3f} vs {:.3f})", d_idle,
                           a.imbalance.worker, b.imbalance.worker)}};
  if (recompute_rank(c.layout.checkpoint) > recompute_rank(w.layout.checkpoint) && d_recompute > 0)
    causes.push_back({std::min(d_recompute, std::max(d_compute, d_recompute)),
                      fmt::format("recomputation (checkpoint {} vs {}) +{:.3g} s", to_string(c.layout.checkpoint),
                                  to_string(w.layout.checkpoint), d_recompute)});
  else if (a.imbalance.worker > b.imbalance.worker * 1.02)
    causes.push_back({d_compute, fmt::format("imbalance: compute +{:.3g} s (worker imbalance {:.3f} vs {:.3f})",
                                             d_compute, a.imbalance.worker, b.imbalance.worker)});
  else
    causes.push_back({d_compute, fmt::format("compute +{:.3g} s", d_compute)});
  const Cause& top = *std::max_element(causes.begin(), causes.end(),
                                       [](const Cause& x, const Cause& y) { return x.s < y.s; });
  std::string r = fmt::format("+{:.2f}%: {}", 100.0 * d_total / (b.step_time_s * fb), top.what);
  if (c.memory.peak_GB < w.memory.peak_GB)
    r += fmt::format("; needs less memory ({:.1f} vs {:.1f} GB)", c.memory.peak_GB, w.memory.peak_GB);
  return r;
}

PlanResult plan(const Experiment& base, const ConfigStore& store, const PlanOptions& o) {
  auto progress = [&](const std::string& stage, int64_t done, int64_t total) {
    if (o.progress) o.progress(stage, done, total);
  };
  PlanResult res;
  PlanStats& st = res.stats;
  st.gpus = o.space.gpus > 0 ? o.space.gpus : base.cluster.gpus();
  // Counted before anything is enumerated: a space too large is refused at once.
  const SpaceSize size = count_space(base, o.space);
  const double enumeration_s = enumeration_seconds(size, st.gpus);
  if ((o.max_layouts > 0 && size.layouts > o.max_layouts) ||
      (o.max_enumeration_s > 0 && enumeration_s > o.max_enumeration_s))
    throw ConfigError(fmt::format(
        "plan: the search space of {} GPUs holds {} layouts ({} hierarchical rings, each checked rank by rank), "
        "~{:.0f} s to enumerate: above the planner's limits ({} layouts, ~{:.0f} s): narrow it with --fix KEY (keeps "
        "the experiment's value), --set parallel.KEY=VALUE or --gpus N",
        st.gpus, size.layouts, size.hierarchical, enumeration_s, o.max_layouts, o.max_enumeration_s));
  Space space = enumerate_space(base, o.space,
                                [&](int64_t done, int64_t total) { progress("enumerating layouts", done, total); });
  st.enumerated = space.enumerated;
  st.invalid = space.invalid;
  st.first_invalid = space.first_invalid;
  if (space.layouts.empty())
    throw ConfigError(fmt::format("plan: none of the {} layouts of {} GPUs is valid for this experiment (first "
                                  "refusal: {})",
                                  space.enumerated, st.gpus, space.first_invalid));

  // Candidates that fit in memory.
  std::vector<PlanCandidate> cand;
  double best_shortfall = std::numeric_limits<double>::infinity();
  Experiment scratch = base;  // fields only: the memory model and the floor read no JSON
  for (size_t i = 0; i < space.layouts.size(); ++i) {
    if (i % 4096 == 0) progress("checking GPU memory", int64_t(i), int64_t(space.layouts.size()));
    PlanCandidate c;
    c.index = int64_t(i);
    c.layout = space.layouts[i];
    set_layout(scratch, c.layout);
    c.memory = memory_fit(scratch);
    c.tokens = tokens_of(scratch);
    if (c.memory.oom) {
      ++st.oom;
      if (c.memory.shortfall_GB() < best_shortfall) {
        best_shortfall = c.memory.shortfall_GB();
        st.smallest_shortfall_layout = layout_label(c.layout);
      }
      continue;
    }
    cand.push_back(std::move(c));
  }
  if (st.oom > 0) st.smallest_shortfall_GB = best_shortfall;
  if (cand.empty())
    throw ConfigError(fmt::format("plan: no layout of {} GPUs fits in GPU memory ({} GB): the closest, {}, needs "
                                  "{:.2f} GB more (of {} layouts, {} out of memory)",
                                  st.gpus, base.cluster.gpu.memory_GB, st.smallest_shortfall_layout, best_shortfall,
                                  space.enumerated, st.oom));

  std::deque<pipeline::Session> sessions;  // one per worker, for the whole search
  EvaluateOptions eo;
  eo.engine = engine::EngineKind::analytic;
  eo.jobs = o.jobs;
  eo.sessions = &sessions;
  eo.bound_by = false;  // ranking only: filled for the printed candidates at the end
  eo.symmetry_above_ops = o.symmetry_above_ops;
  eo.extrapolate_above_ops = o.extrapolate_above_ops;
  const size_t k = size_t(std::max(1, o.top_k));
  // The ring-transfer floor (plan_bound.hpp), once per ring arrangement.
  const topology::Topology topo(base.cluster);
  std::map<std::string, RingPassFloor> ring_floors;
  auto with_comm = [&](const Experiment& x, ComputeFloor f) {
    auto [it, fresh] = ring_floors.try_emplace(ring_pass_key(x));
    if (fresh) it->second = ring_pass_floor(x, topo);
    f.comm_s = ring_comm_floor(x, it->second);
    return f;
  };

  // 3. The seed: the experiment's own layout, the first incumbent.
  const Layout seed_layout = layout_of(base);
  res.seed.layout = seed_layout;
  res.seed.memory = memory_fit(base);
  res.seed.tokens = tokens_of(base);
  size_t seed_id = cand.size();
  for (size_t i = 0; i < cand.size(); ++i)
    if (same_layout(cand[i].layout, seed_layout)) seed_id = i;
  res.seed_in_space = std::any_of(space.layouts.begin(), space.layouts.end(),
                                  [&](const Layout& l) { return same_layout(l, seed_layout); });
  progress("simulating the experiment's own layout", 0, 1);
  res.seed.analytic = evaluate({base}, eo)[0];
  if (!res.seed_in_space) ++st.simulated;

  // The full-step stage: every candidate, or those the layer screen keeps.
  auto experiment_of = [&](size_t i) { return apply_layout(base, cand[i].layout); };
  std::vector<double> tokens(cand.size());
  for (size_t i = 0; i < cand.size(); ++i) tokens[i] = cand[i].tokens;
  std::vector<Outcome> out(cand.size());
  std::vector<char> done(cand.size(), 0), wanted(cand.size(), 1);
  if (seed_id < cand.size()) {
    out[seed_id] = res.seed.analytic;
    done[seed_id] = 1;
    ++st.simulated;
  }

  // 4a. The screen: one decoder layer (forward, recomputation, backward) of
  // every layout, ZeRO stage aside, best first by the layer's floor; the
  // screen_keep best go on to full steps.
  const bool screening = o.screen && base.scope == Scope::step;
  if (screening) {
    nlohmann::json lj = base.resolved;
    lj["scope"] = "layer";
    const Experiment base_layer = parse_experiment(std::move(lj), base.source, base.workload.pattern_base_dir, store);
    std::map<std::string, size_t> key_of;
    std::vector<Layout> layer_layouts;
    std::vector<size_t> screen_of(cand.size());
    std::vector<double> layer_tokens;
    for (size_t i = 0; i < cand.size(); ++i) {
      Layout l = cand[i].layout;
      l.zero_stage = seed_layout.zero_stage;  // a layer alone holds no optimizer step
      const std::string key = layout_json(l).dump();
      auto [it, fresh] = key_of.emplace(key, layer_layouts.size());
      if (fresh) {
        layer_layouts.push_back(l);
        layer_tokens.push_back(cand[i].tokens);
      }
      screen_of[i] = it->second;
    }
    auto layer_of = [&](size_t j) { return apply_layout(base_layer, layer_layouts[j]); };
    const size_t n_layers = layer_layouts.size();
    std::vector<Outcome> lout(n_layers);
    std::vector<char> ldone(n_layers, 0);
    // The mask of the screened layer, from the seed's layer (or the first that runs).
    double lmask = -1;
    {
      Experiment seed_layer = base_layer;
      const Outcome so = evaluate({seed_layer}, eo)[0];
      ++st.screened;
      if (so.ok) lmask = mask_fwd_flops_per_sequence(seed_layer, so.report);
    }
    for (size_t j = 0; lmask < 0 && j < n_layers; ++j) {
      const Experiment le = layer_of(j);
      lout[j] = evaluate({le}, eo)[0];
      ldone[j] = 1;
      ++st.screened;
      if (lout[j].ok) lmask = mask_fwd_flops_per_sequence(le, lout[j].report);
    }
    if (lmask < 0) throw ConfigError(fmt::format("plan: no layout could be simulated (first refusal: {})", lout[0].error));
    std::vector<double> lfloor(n_layers), lcompute(n_layers);
    Experiment lscratch = base_layer;
    for (size_t j = 0; j < n_layers; ++j) {
      set_layout(lscratch, layer_layouts[j]);
      const ComputeFloor f = with_comm(lscratch, compute_floor(lscratch, lmask));
      lfloor[j] = f.total() / layer_tokens[j];
      lcompute[j] = f.compute_s() / layer_tokens[j];
      if (o.screen_max_ops > 0) {
        // What the layer's simulation would hold (one replica's, where the shortcut applies).
        const bool one = eo.symmetry_above_ops >= 0 && lscratch.parallel.dp > 1 &&
                         generate::count_step_ops(lscratch) > eo.symmetry_above_ops;
        const int64_t ops = one ? generate::count_replica_ops(lscratch) : generate::count_step_ops(lscratch);
        if (ops > o.screen_max_ops && !ldone[j]) {
          ldone[j] = 2;  // not screened: too large (never simulated, never kept)
          ++st.screen_too_large;
        }
      }
    }
    const size_t keep = size_t(o.screen_keep > 0 ? o.screen_keep : std::max<int>(8, 3 * int(k)));
    double lbound = 0;
    bool budget_hit = false;
    std::vector<std::string> groups;  // factorisation, checkpoint and partition: the budget's breadth
    for (const Layout& l : layer_layouts)
      groups.push_back(fmt::format("{} {} {} {} {} {} {}", l.dp, l.tp, l.hp, l.cp, to_string(l.checkpoint),
                                   to_string(l.partition), l.stripe_tokens));
    st.screened += best_first(layer_of, lfloor, layer_tokens, lout, ldone, keep, o.prune, o.batch, eo,
                              [&](int64_t d, int64_t t) { progress("screening layouts (one layer, analytic)", d, t); },
                              &lbound, o.screen_budget, &budget_hit, &groups);
    st.screen_budget_hit = budget_hit;
    st.screen_points = int64_t(n_layers);
    st.screen_pruned = std::count(ldone.begin(), ldone.end(), char(0));  // not the too large (2)
    for (size_t j = 0; j < n_layers; ++j) st.screen_pruned_comm += !ldone[j] && lcompute[j] <= lbound;
    for (const Outcome& x : lout) st.one_replica += x.one_replica, st.streamed += x.streamed;
    const std::vector<size_t> kept = best_of(lout, layer_tokens, keep);
    std::vector<char> is_kept(n_layers, 0);
    for (size_t j : kept) is_kept[j] = 1;
    for (size_t i = 0; i < cand.size(); ++i) wanted[i] = is_kept[screen_of[i]] || done[i];
  }

  // The mask's FLOPs for the step floor, from the seed or the first layout that simulates.
  double mask = -1;
  if (res.seed.analytic.ok) mask = mask_fwd_flops_per_sequence(base, res.seed.analytic.report);
  for (size_t i = 0; mask < 0 && i < cand.size(); ++i) {
    if (!wanted[i]) continue;
    const Experiment ei = experiment_of(i);
    if (!done[i]) {
      out[i] = evaluate({ei}, eo)[0];
      done[i] = 1;
      ++st.simulated;
    }
    if (out[i].ok) mask = mask_fwd_flops_per_sequence(ei, out[i].report);
  }
  if (mask < 0)
    throw ConfigError(fmt::format("plan: no layout could be simulated (first refusal: {})",
                                  res.seed.analytic.ok ? out[0].error : res.seed.analytic.error));

  // 4b. Best first by the step's floor per token over the wanted candidates.
  std::vector<size_t> ids;
  for (size_t i = 0; i < cand.size(); ++i)
    if (wanted[i]) ids.push_back(i);
    else ++st.screened_out;
  std::vector<double> ffloor, ftokens;
  std::vector<Outcome> fout;
  std::vector<char> fdone;
  for (size_t i : ids) {
    set_layout(scratch, cand[i].layout);
    cand[i].floor = with_comm(scratch, compute_floor(scratch, mask));
    ffloor.push_back(cand[i].floor.total() / tokens[i]);
    ftokens.push_back(tokens[i]);
    fout.push_back(std::move(out[i]));
    fdone.push_back(done[i]);
  }
  double fbound = 0;
  st.simulated += best_first([&](size_t j) { return experiment_of(ids[j]); }, ffloor, ftokens, fout, fdone, k, o.prune, o.batch, eo,
                             [&](int64_t d, int64_t t) { progress("simulating full steps (analytic)", d, t); }, &fbound);
  for (size_t j = 0; j < ids.size(); ++j) {
    PlanCandidate& c = cand[ids[j]];
    c.analytic = std::move(fout[j]);
    if (!fdone[j]) {
      ++st.pruned_bound;
      st.pruned_comm += c.floor.compute_s() / tokens[ids[j]] <= fbound;
    } else if (!c.analytic.ok && st.failed++ == 0) {
      st.first_failure = c.analytic.error;
    }
    st.one_replica += c.analytic.one_replica;
    st.streamed += c.analytic.streamed;
    st.estimated += !c.analytic.estimated.empty();
  }
  if (seed_id < cand.size()) res.seed.index = cand[seed_id].index;

  std::vector<size_t> top = best_k(cand, k);
  if (top.empty())
    throw ConfigError(fmt::format("plan: no layout could be simulated (first refusal: {})", st.first_failure));

  // 5. SimGrid on the K best; the winner is the fastest there.
  if (o.confirm_simgrid) {
    EvaluateOptions so = eo;
    so.engine = engine::EngineKind::simgrid;
    so.bound_by = true;
    so.symmetry_above_ops = so.extrapolate_above_ops = -1;
    // SimGrid runs the whole Schedule: not one replica for all (its platform's
    // routes are not folded), and a step estimated because it is too large to
    // simulate whole is too large for it too.
    auto skip = [](const Outcome& a) -> std::string {
      if (!a.estimated.empty()) return "not re-simulated with SimGrid: the step is too large to simulate whole (" + a.estimated + ")";
      if (a.one_replica) return "not re-simulated with SimGrid: it runs every replica, and this step was simulated one data-parallel replica for all";
      if (a.streamed) return "not re-simulated with SimGrid: the step is too large to hold whole (it was streamed)";
      return "";
    };
    for (size_t j = 0; j < top.size(); ++j) {
      progress("confirming the best with SimGrid", int64_t(j), int64_t(top.size()));
      PlanCandidate& c = cand[top[j]];
      c.simgrid_skipped = skip(c.analytic);
      if (c.simgrid_skipped.empty()) {
        c.simgrid = evaluate({experiment_of(top[j])}, so)[0];
        c.confirmed = true;
        ++st.confirmed;
      }
      if (c.index == res.seed.index) {
        res.seed.simgrid = c.simgrid;
        res.seed.confirmed = c.confirmed;
        res.seed.simgrid_skipped = c.simgrid_skipped;
      }
    }
    if (!res.seed.confirmed && res.seed.simgrid_skipped.empty() && res.seed.analytic.ok) {
      res.seed.simgrid_skipped = skip(res.seed.analytic);
      if (res.seed.simgrid_skipped.empty()) {
        progress("confirming the experiment's own layout with SimGrid", 0, 1);
        res.seed.simgrid = evaluate({base}, so)[0];
        res.seed.confirmed = true;
        ++st.confirmed;
      }
    }
    auto per_token = [&](size_t i) {
      const PlanCandidate& c = cand[i];
      return (c.simgrid.ok ? c.simgrid : c.analytic).report.step_time_s / c.tokens;
    };
    std::stable_sort(top.begin(), top.end(), [&](size_t a, size_t b) { return per_token(a) < per_token(b); });
  }
  // bound_by of each printed step whose shown figures are analytic (SimGrid's
  // reports carry their own): one more simulation each, equal to the ranking's
  // but for it. Not under the shortcut or for an estimate (bound_by.hpp needs
  // every replica of a simulated step).
  {
    EvaluateOptions bo = eo;
    bo.bound_by = true;
    auto fill = [&](PlanCandidate& c, const Experiment& x) {
      if ((c.confirmed && c.simgrid.ok) || !c.analytic.ok || c.analytic.one_replica || c.analytic.streamed ||
          !c.analytic.estimated.empty() || c.analytic.report.bound_by)
        return;
      progress("what bounds the printed steps", 0, 1);
      Outcome again = evaluate({x}, bo)[0];
      if (again.ok && again.report.step_time_s == c.analytic.report.step_time_s) c.analytic.report.bound_by = again.report.bound_by;
    };
    for (size_t i : top) {
      fill(cand[i], experiment_of(i));
      if (cand[i].index == res.seed.index) res.seed.analytic.report.bound_by = cand[i].analytic.report.bound_by;
    }
    fill(res.seed, base);
  }
  for (size_t i : top) res.ranked.push_back(cand[i]);
  for (size_t j = 1; j < res.ranked.size(); ++j) res.ranked[j].reason = reason_lost(res.ranked[j], res.ranked[0]);
  if (res.seed.analytic.ok && !same_layout(res.seed.layout, res.ranked[0].layout))
    res.seed.reason = reason_lost(res.seed, res.ranked[0]);
  return res;
}

int64_t auto_screen_budget(int gpus) { return gpus > 1024 ? 64 : 0; }

double enumeration_seconds(const SpaceSize& n, int gpus) {
  return double(n.layouts) * kEnumerateSecondsPerLayout +
         double(n.hierarchical) * double(gpus) * kEnumerateSecondsPerHierarchicalGpu;
}

}  // namespace rm::search
