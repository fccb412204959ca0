// The planner on a space small enough to enumerate: its space has no duplicates
// and only valid layouts, its compute floor never exceeds a simulated step,
// pruning never changes the K best, the winner is the brute-force best and at
// least as fast as the experiment's own layout, and threads change nothing.
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/topology/topology.hpp"
#include "sim/search/plan.hpp"

namespace rm::search {
namespace {

ConfigStore store() { return ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}); }

// The default experiment (MTraining's sparse pattern, hierarchical stripe ring)
// shrunk: two layers, 8K tokens, on 4 GPUs of one H200 node, a full step.
Experiment small(std::vector<std::string> more = {}) {
  std::vector<std::string> all{"cluster=h200-1x8", "workload.seq_len=8k", "model.layers=2", "parallel.cp=4",
                               "parallel.ring=ring", "scope=step"};
  all.insert(all.end(), more.begin(), more.end());
  return load_experiment(store(), "", all);
}

SpaceOptions small_space() {
  SpaceOptions o;
  o.gpus = 4;
  o.stripe_tokens = {128, 512};
  return o;
}

PlanOptions options(bool prune) {
  PlanOptions o;
  o.space = small_space();
  o.top_k = 3;
  o.confirm_simgrid = false;
  o.prune = prune;
  o.screen = false;  // exact: every layout that passes the floor gets a full step
  o.jobs = 2;
  return o;
}

TEST(PlanSpace, ValidLayoutsWithoutDuplicates) {
  const Experiment e = small();
  const Space s = enumerate_space(e, small_space());
  ASSERT_GT(s.layouts.size(), 20u);
  EXPECT_EQ(s.enumerated, int64_t(s.layouts.size()) + s.invalid);
  std::set<std::string> seen;
  bool tensor = false;
  for (size_t i = 0; i < s.layouts.size(); ++i) {
    const Layout& l = s.layouts[i];
    EXPECT_EQ(l.dp * l.tp * l.hp * l.cp, 4);
    tensor |= l.tp > 1;
    EXPECT_TRUE(seen.insert(layout_json(l).dump()).second) << layout_label(l);
    EXPECT_EQ(layout_json(layout_of(apply_layout(e, l))), layout_json(l));
  }
  // The seed's layout, Ulysses (cp = 1) and a 2D double ring are all in it.
  EXPECT_TRUE(seen.count(layout_json(layout_of(e)).dump()));
  bool ulysses = false, two_d = false;
  for (const Layout& l : s.layouts) {
    ulysses |= l.cp == 1 && l.hp == 4;
    two_d |= l.hp == 2 && l.cp == 2 && l.ring == RingKind::double_ring;
  }
  EXPECT_TRUE(ulysses);
  EXPECT_TRUE(tensor);
  EXPECT_TRUE(two_d);
}

// `--screen-budget auto`: every shipped experiment and quality case (at most 64
// GPUs here, 512 in docs/planner.md) screens without a limit; the 4,096-GPU case
// is capped.
TEST(PlanScreen, AutoBudgetLimitsOnlyPlansAboveAThousandGpus) {
  for (int gpus : {1, 4, 32, 64, 512, 1024}) EXPECT_EQ(auto_screen_budget(gpus), 0) << gpus;
  for (int gpus : {1025, 2048, 4096, 65536}) EXPECT_EQ(auto_screen_budget(gpus), 64) << gpus;
}

TEST(PlanSpace, FixedKeysKeepTheBaseValue) {
  SpaceOptions o = small_space();
  o.fixed = {"parallel.ring", "parallel.checkpoint", "parallel.cp"};
  const Space s = enumerate_space(small(), o);
  ASSERT_FALSE(s.layouts.empty());
  for (const Layout& l : s.layouts) {
    EXPECT_EQ(l.ring, RingKind::ring);
    EXPECT_EQ(l.checkpoint, Checkpoint::full);
    EXPECT_EQ(l.cp, 4);
  }
}

TEST(PlanBound, GemmFlopsAreWhatTheScheduleCarries) {
  for (const char* ck : {"none", "full", "selective"})
    for (const auto& [tp, hp, cp] : std::vector<std::tuple<int, int, int>>{{1, 1, 4}, {1, 2, 2}, {1, 4, 1}, {2, 1, 2}, {2, 2, 1}}) {
      const Experiment e = small({std::string("parallel.checkpoint=") + ck, "parallel.hp=" + std::to_string(hp),
                                  "parallel.cp=" + std::to_string(cp), "parallel.tp=" + std::to_string(tp)});
      pipeline::Session session;
      const schedule::Schedule s = session.schedule(e);
      std::map<int, double> per_rank;
      for (const auto& op : s.ops)
        if (op.kind == schedule::OpKind::gemm) per_rank[op.rank] += s.desc(op).flops;
      for (const auto& [rank, f] : per_rank) EXPECT_NEAR(f, rank_gemm_flops(e), 1e-9 * f) << ck << " rank " << rank;
    }
}

// The --set overrides that spell a layout, as a user would type them.
std::vector<std::string> overrides_of(const Layout& l) {
  std::vector<std::string> o;
  const nlohmann::json j = layout_json(l);
  for (auto it = j.begin(); it != j.end(); ++it)
    o.push_back("parallel." + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()));
  return o;
}

// Enumeration sets a layout's fields on the parsed base instead of re-parsing:
// over many random layouts of several bases, apply_layout equals parsing the
// same overrides (fields, summary_json, the resolved JSON that Schedules carry),
// and refuses with the parser's very message what the parser refuses.
TEST(PlanSpace, ApplyLayoutEqualsParsingTheOverrides) {
  const std::vector<std::vector<std::string>> bases = {
      {"cluster=h200-1x8", "workload.seq_len=8k", "model.layers=2", "parallel.cp=4", "parallel.ring=ring"},
      {"cluster=a100-80g-8x8-hdr", "model=llama2-7b", "workload.seq_len=64k", "parallel.cp=8"},
      {"cluster=h100-8x8-ndr", "workload.seq_len=96k", "parallel.cp=16", "parallel.grad_comm_dtype=bf16"}};
  std::mt19937 rng(10);
  auto any = [&](auto const& v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  const std::vector<int> ints = {1, 2, 4, 8, 3};  // 3: refused by most checks
  int accepted = 0, refused = 0;
  for (const auto& b : bases) {
    const Experiment base = load_experiment(store(), "", b);
    for (int n = 0; n < 100; ++n) {
      Layout l;
      l.dp = any(std::vector<int>{1, 2}), l.tp = any(std::vector<int>{1, 2, 4}), l.hp = any(ints), l.cp = any(ints);
      l.partition = any(std::vector<Partition>{Partition::contiguous, Partition::zigzag, Partition::stripe,
                                               Partition::balanced});
      l.stripe_tokens = any(std::vector<int64_t>{128, 512, 128, 3000});
      l.ring = any(std::vector<RingKind>{RingKind::ring, RingKind::double_ring, RingKind::hierarchical});
      l.window = any(ints);
      l.placement = any(std::vector<PlacementOrder>{PlacementOrder::head_first, PlacementOrder::context_first,
                                                    PlacementOrder::interleaved});
      l.ring_order = any(std::vector<RingOrder>{RingOrder::rank, RingOrder::zigzag_pairs, RingOrder::topology});
      l.shuffle = any(std::vector<ShuffleMode>{ShuffleMode::per_call, ShuffleMode::once});
      l.checkpoint = any(std::vector<Checkpoint>{Checkpoint::none, Checkpoint::full, Checkpoint::selective});
      l.zero_stage = any(std::vector<int>{0, 1, 2, 3});
      std::vector<std::string> sets = b;
      for (const std::string& s : overrides_of(l)) sets.push_back(s);
      std::string parse_error, apply_error;
      Experiment parsed, applied;
      try { parsed = load_experiment(store(), "", sets); } catch (const ConfigError& e) { parse_error = e.what(); }
      try { applied = apply_layout(base, l); } catch (const ConfigError& e) { apply_error = e.what(); }
      ASSERT_EQ(apply_error, parse_error) << layout_label(l);
      if (!parse_error.empty()) {
        ++refused;
        continue;
      }
      ++accepted;
      EXPECT_EQ(layout_json(layout_of(applied)), layout_json(l));
      EXPECT_EQ(summary_json(applied), summary_json(parsed)) << layout_label(l);
      EXPECT_EQ(applied.resolved, parsed.resolved) << layout_label(l);
      EXPECT_EQ(applied.parallel.grad_comm_dtype, parsed.parallel.grad_comm_dtype);
      EXPECT_EQ(applied.parallel.loss_chunk_tokens, parsed.parallel.loss_chunk_tokens);
      EXPECT_EQ(applied.source, parsed.source);
      EXPECT_EQ(applied.scope, parsed.scope);
    }
  }
  // Both branches exercised.
  EXPECT_GT(accepted, 15);
  EXPECT_GT(refused, 15);
}

// Every layout of the small space simulated, without the planner (the oracle).
struct Brute {
  Space space;
  std::vector<Experiment> experiments;  // apply_layout of each
  std::vector<Outcome> out;
};
const Brute& brute() {
  static const Brute b = [] {
    const Experiment base = small();
    Brute r{enumerate_space(base, small_space()), {}, {}};
    for (const Layout& l : r.space.layouts) r.experiments.push_back(apply_layout(base, l));
    EvaluateOptions o;
    o.jobs = 2;
    r.out = evaluate(r.experiments, o);
    return r;
  }();
  return b;
}

// The planner without pruning. Shared by the tests below.
const PlanResult& exhaustive() {
  static const PlanResult r = plan(small(), store(), options(false));
  return r;
}

TEST(Plan, FloorNeverExceedsTheSimulatedStep) {
  const Space& s = brute().space;
  const std::vector<Experiment>& exps = brute().experiments;
  const std::vector<Outcome>& out = brute().out;
  ASSERT_TRUE(out[0].ok) << out[0].error;
  const double mask = mask_fwd_flops_per_sequence(exps[0], out[0].report);
  EXPECT_GT(mask, 0);
  int checked = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok) continue;
    ++checked;
    ComputeFloor f = compute_floor(exps[i], mask);
    EXPECT_GT(f.gemm_s, 0);
    EXPECT_GT(f.attention_s, 0);
    f.comm_s = ring_comm_floor(exps[i], ring_pass_floor(exps[i], topology::Topology(exps[i].cluster)));
    EXPECT_EQ(f.comm_s > 0, s.layouts[i].cp > 1) << layout_label(s.layouts[i]);
    EXPECT_LE(f.comm_s, out[i].report.step_time_s) << layout_label(s.layouts[i]);
    EXPECT_LE(f.total(), out[i].report.step_time_s) << layout_label(s.layouts[i]);
    // Not vacuous: the floor is a sizeable part of the step.
    EXPECT_GT(f.total(), 0.2 * out[i].report.step_time_s) << layout_label(s.layouts[i]);
  }
  EXPECT_EQ(checked, int(out.size()));
}

// The ring-transfer floor where it matters: rings across the nodes of a
// cluster whose NICs are far slower than NVLink. For every layout of a 16-GPU
// space over two nodes (every factorisation, ring kind, window, placement and
// order; both checkpoint policies that differ in ring passes), the ring term
// and the whole floor (GEMMs + max(attention, ring)) are at most the simulated
// step, in every scope the planner asks; and it is not vacuous: the ring term
// decides the floor for some layouts, and there the floor is within 2x of the step.
TEST(PlanBound, RingFloorNeverExceedsTheSimulatedStepAcrossNodes) {
  const Experiment base = load_experiment(
      store(), "", {"cluster=a100-80g-8x8-hdr", "workload.seq_len=32k", "model.layers=2", "parallel.cp=16",
                    "parallel.ring=ring", "scope=step"});
  SpaceOptions so;
  so.gpus = 16;
  so.stripe_tokens = {128};
  so.fixed = {"parallel.partition", "parallel.shuffle", "parallel.zero_stage", "parallel.dp", "parallel.tp"};
  const Space space = enumerate_space(base, so);
  std::vector<Experiment> points;
  for (const Layout& l : space.layouts)
    if (l.checkpoint != Checkpoint::selective) points.push_back(apply_layout(base, l));
  ASSERT_GT(points.size(), 30u);
  const size_t n = points.size();
  for (size_t i = 0; i < n; i += 3) {  // the other scopes on a third of them
    for (const char* scope : {"layer", "attention_fwd_bwd", "attention_fwd"}) {
      nlohmann::json j = points[i].resolved;
      j["scope"] = scope;
      points.push_back(parse_experiment(std::move(j), points[i].source, points[i].workload.pattern_base_dir, store()));
    }
  }
  EvaluateOptions eo;
  eo.jobs = 2;
  const std::vector<Outcome> out = evaluate(points, eo);
  const topology::Topology topo(base.cluster);
  int above_compute = 0, tight = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    ASSERT_TRUE(out[i].ok) << out[i].error;
    const double step = out[i].report.step_time_s;
    const std::string what = layout_label(layout_of(points[i])) + " scope " + to_string(points[i].scope);
    ComputeFloor f = compute_floor(points[i], mask_fwd_flops_per_sequence(points[i], out[i].report));
    f.comm_s = ring_comm_floor(points[i], ring_pass_floor(points[i], topo));
    EXPECT_LE(f.comm_s, step) << what;
    EXPECT_LE(f.total(), step) << what;  // GEMMs + max(attention, ring): what the planner prunes by
    if (f.comm_s > f.attention_s) {      // the ring term decides the floor
      ++above_compute;
      tight += f.total() > 0.5 * step;
    }
  }
  EXPECT_GT(above_compute, 5);
  EXPECT_GT(tight, 5);
  std::printf("ring floor over %zu simulated points: above the attention floor for %d, of which the floor is above "
              "half the step for %d\n",
              points.size(), above_compute, tight);
}

TEST(Plan, PrunedSearchFindsTheBruteForceBest) {
  const PlanResult& all = exhaustive();
  EXPECT_EQ(all.stats.pruned_bound, 0);
  const PlanResult pruned = plan(small(), store(), options(true));
  ASSERT_EQ(pruned.ranked.size(), all.ranked.size());
  for (size_t i = 0; i < all.ranked.size(); ++i) {
    EXPECT_EQ(layout_json(pruned.ranked[i].layout), layout_json(all.ranked[i].layout)) << i;
    EXPECT_EQ(pruned.ranked[i].analytic.report.step_time_s, all.ranked[i].analytic.report.step_time_s);
  }
  // The winner alone (K = 1): the floor is tightest against the best time.
  PlanOptions one = options(true);
  one.top_k = 1;
  const PlanResult winner = plan(small(), store(), one);
  ASSERT_EQ(winner.ranked.size(), 1u);
  EXPECT_EQ(layout_json(winner.ranked[0].layout), layout_json(all.ranked[0].layout));
  EXPECT_GT(winner.stats.pruned_bound, 0) << "the floor pruned nothing: the test space no longer exercises it";
  EXPECT_LT(winner.stats.simulated, all.stats.simulated);
  std::printf("small space: %lld layouts, %lld invalid, %lld out of memory; K = 3: %lld simulated, %lld pruned by "
              "the floor; K = 1: %lld simulated, %lld pruned\n",
              (long long)pruned.stats.enumerated, (long long)pruned.stats.invalid, (long long)pruned.stats.oom,
              (long long)pruned.stats.simulated, (long long)pruned.stats.pruned_bound,
              (long long)winner.stats.simulated, (long long)winner.stats.pruned_bound);

  // The brute-force best, computed here without the planner.
  const Space& s = brute().space;
  const std::vector<Outcome>& out = brute().out;
  size_t best = 0;
  auto per_token = [&](size_t i) {
    return out[i].report.step_time_s / (double(s.layouts[i].dp) * brute().experiments[i].workload.seq_len);
  };
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].ok && per_token(i) < per_token(best)) best = i;
  EXPECT_EQ(layout_json(pruned.ranked[0].layout), layout_json(s.layouts[best]));
  EXPECT_EQ(layout_json(winner.ranked[0].layout), layout_json(s.layouts[best]));
}

TEST(Plan, TheLayerScreenKeepsTheWinnerWithinTwoPercent) {
  PlanOptions o = options(true);
  o.screen = true;
  const PlanResult r = plan(small(), store(), o);
  const PlanResult& all = exhaustive();
  EXPECT_GT(r.stats.screened, 0);
  EXPECT_GT(r.stats.screened_out, 0);
  EXPECT_LT(r.stats.simulated, all.stats.simulated);
  EXPECT_LE(r.ranked[0].analytic_time_per_token(), 1.02 * all.ranked[0].analytic_time_per_token());
  std::printf("screened: %lld layer simulations of %lld layers, %lld full steps; winner %s vs exhaustive %s\n",
              (long long)r.stats.screened, (long long)r.stats.screen_points, (long long)r.stats.simulated,
              layout_label(r.ranked[0].layout).c_str(), layout_label(all.ranked[0].layout).c_str());
}

TEST(Plan, WinnerIsAtLeastAsFastAsTheSeed) {
  const PlanResult& r = exhaustive();
  ASSERT_TRUE(r.seed.analytic.ok);
  EXPECT_TRUE(r.seed_in_space);
  EXPECT_LE(r.ranked[0].analytic_time_per_token(), r.seed.analytic_time_per_token());
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    EXPECT_LE(r.ranked[i - 1].analytic_time_per_token(), r.ranked[i].analytic_time_per_token());
    EXPECT_FALSE(r.ranked[i].reason.empty());
  }
  EXPECT_TRUE(r.ranked[0].reason.empty());
}

TEST(Plan, ThreadsChangeNothing) {
  PlanOptions one = options(true);
  one.jobs = 1;
  const PlanResult a = plan(small(), store(), one);
  PlanOptions three = options(true);
  three.jobs = 3;
  const PlanResult b = plan(small(), store(), three);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(layout_json(a.ranked[i].layout), layout_json(b.ranked[i].layout));
    EXPECT_EQ(a.ranked[i].analytic.report.step_time_s, b.ranked[i].analytic.report.step_time_s);
  }
  EXPECT_EQ(a.stats.simulated, b.stats.simulated);
  EXPECT_EQ(a.stats.pruned_bound, b.stats.pruned_bound);
}

// The estimate of a step from its 1- and 2-layer steps, and from 1 and 4 layers
// (where the 4-layer step is small enough), against the real step,
// on layouts small enough to simulate both (6 layers, 16K tokens, 8 GPUs of one
// node and 16 over two): every parallelism, ring kind and checkpoint policy,
// with and without ZeRO traffic. The tolerance is docs/planner.md's.
TEST(PlanEstimate, LayerExtrapolationIsWithinTolerance) {
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.cp=8", "parallel.ring=ring", "parallel.checkpoint=full"},
      {"parallel.cp=8", "parallel.ring=hierarchical", "parallel.partition=stripe", "parallel.checkpoint=selective"},
      {"parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=3", "parallel.checkpoint=none"},
      {"parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=1", "parallel.checkpoint=full"},
      {"parallel.hp=2", "parallel.cp=4", "parallel.ring=double_ring", "parallel.window=2"},
      {"parallel.hp=8", "parallel.cp=1"},
      {"parallel.tp=2", "parallel.cp=4", "parallel.partition=zigzag"},
      {"cluster=a100-80g-8x8-hdr", "parallel.cp=16", "parallel.ring=ring", "parallel.partition=zigzag"},
      {"cluster=a100-80g-8x8-hdr", "parallel.dp=2", "parallel.cp=8", "parallel.zero_stage=2"},
      {"cluster=a100-80g-8x8-hdr", "parallel.hp=2", "parallel.cp=8", "parallel.ring=double_ring", "parallel.window=4"},
  };
  pipeline::Session session;
  double worst = 0;
  for (const auto& c : cases) {
    std::vector<std::string> sets{"cluster=h200-1x8", "workload.seq_len=16k", "model.layers=6", "scope=step"};
    sets.insert(sets.end(), c.begin(), c.end());
    const Experiment e = load_experiment(store(), "", sets);
    const Outcome whole = evaluate_one(e, engine::EngineKind::analytic, session, false);
    ASSERT_TRUE(whole.ok) << whole.error;
    EXPECT_TRUE(whole.estimated.empty());
    // Above 0 ops nothing fits: 1 and 2 layers. Just below the whole step: 1 and 4.
    for (const int64_t above : {int64_t(0), whole.ops - 1}) {
      EvaluateOptions o;
      o.extrapolate_above_ops = above;
      o.bound_by = false;
      const Outcome est = evaluate_one(e, o, session);
      ASSERT_TRUE(est.ok) << est.error;
      EXPECT_NE(est.estimated.find(above == 0 ? "from 1- and 2-layer steps" : "from 1- and 4-layer steps"),
                std::string::npos) << est.estimated;
      const double err = est.report.step_time_s / whole.report.step_time_s - 1;
      worst = std::max(worst, std::abs(err));
      EXPECT_LT(std::abs(err), 0.03) << layout_label(layout_of(e));
      EXPECT_NEAR(est.report.model_flops, whole.report.model_flops, 0.03 * whole.report.model_flops);
      EXPECT_NEAR(est.report.mfu, whole.report.mfu, 0.03 * whole.report.mfu);
      EXPECT_NEAR(est.report.breakdown.mean.compute_s, whole.report.breakdown.mean.compute_s,
                  0.03 * whole.report.step_time_s);
      EXPECT_EQ(est.report.memory.peak_GB(), whole.report.memory.peak_GB());
      EXPECT_FALSE(est.report.bound_by);
    }
  }
  std::printf("layer extrapolation: worst step-time error %.3f%% over %zu layouts and both samples\n", 100 * worst,
              cases.size());
}

// The data-parallel shortcut inside the planner's evaluation: the step time is
// the full step's to the bit, for a ring that stays in a node and one across nodes.
TEST(PlanEstimate, SymmetryGivesTheFullStepTime) {
  for (const char* cluster : {"cluster=h200-1x8", "cluster=a100-80g-8x8-hdr"}) {
    const Experiment e = load_experiment(store(), "", {cluster, "workload.seq_len=16k", "model.layers=2", "parallel.dp=2",
                                                       "parallel.cp=4", "parallel.ring=ring", "parallel.zero_stage=3"});
    pipeline::Session session;
    const Outcome whole = evaluate_one(e, engine::EngineKind::analytic, session, false);
    EvaluateOptions o;
    o.symmetry_above_ops = 0;
    const Outcome one = evaluate_one(e, o, session);
    ASSERT_TRUE(one.ok) << one.error;
    EXPECT_TRUE(one.one_replica) << cluster;
    EXPECT_FALSE(whole.one_replica);
    EXPECT_EQ(one.report.step_time_s, whole.report.step_time_s) << cluster;
    EXPECT_LT(one.ops, whole.ops);
  }
}

// A plan whose steps are estimated says so, and does not send them to SimGrid.
TEST(PlanEstimate, EstimatedStepsAreMarkedAndNotConfirmed) {
  PlanOptions o = options(true);
  o.space.gpus = 4;
  o.space.fixed = {"parallel.dp", "parallel.tp", "parallel.partition", "parallel.shuffle", "parallel.checkpoint"};
  o.confirm_simgrid = true;
  o.extrapolate_above_ops = 0;
  const PlanResult r = plan(small({"model.layers=4"}), store(), o);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.stats.estimated, 0);
  for (const PlanCandidate& c : r.ranked) {
    EXPECT_FALSE(c.analytic.estimated.empty()) << layout_label(c.layout);
    EXPECT_FALSE(c.confirmed);
    EXPECT_NE(c.simgrid_skipped.find("too large"), std::string::npos) << c.simgrid_skipped;
    EXPECT_FALSE(c.analytic.report.bound_by);
  }
  EXPECT_EQ(r.stats.confirmed, 0);
}

// Printed candidates carry what bounds their step (computed after the ranking,
// which skips it), equal to a simulation with it on.
TEST(Plan, PrintedCandidatesHaveBoundBy) {
  const PlanResult& r = exhaustive();
  for (const PlanCandidate& c : r.ranked) {
    ASSERT_TRUE(c.analytic.report.bound_by) << layout_label(c.layout);
    pipeline::Session session;
    const Outcome again = evaluate_one(apply_layout(small(), c.layout), engine::EngineKind::analytic, session, true);
    ASSERT_TRUE(again.report.bound_by);
    EXPECT_EQ(report::brief(*again.report.bound_by), report::brief(*c.analytic.report.bound_by));
  }
  EXPECT_TRUE(r.seed.analytic.report.bound_by);
}

TEST(Plan, NoValidLayoutIsAnError) {
  // 7 GPUs: cp = 7 does not divide 8K tokens, and 7 heads-parallel ranks do not divide 16 heads.
  PlanOptions o = options(true);
  o.space.gpus = 7;
  o.space.fixed = {"parallel.dp"};
  EXPECT_THROW(plan(small(), store(), o), ConfigError);
}

// count_space is what enumerate_space generates, without generating it: on
// the small space, with keys fixed, and across two nodes with hierarchical rings.
TEST(PlanSpace, CountIsWhatTheEnumerationGenerates) {
  SpaceOptions fixed = small_space();
  fixed.fixed = {"parallel.ring", "parallel.dp", "parallel.checkpoint"};
  SpaceOptions nodes;  // 16 GPUs of two H200 nodes, 64K tokens
  nodes.gpus = 16;
  const Experiment two_nodes = small({"cluster.nodes=2", "workload.seq_len=64k"});
  for (const auto& [e, o] : std::vector<std::pair<Experiment, SpaceOptions>>{
           {small(), small_space()}, {small(), fixed}, {two_nodes, nodes}}) {
    const Space s = enumerate_space(e, o);
    EXPECT_EQ(count_space(e, o).layouts, s.enumerated);
    EXPECT_GT(s.invalid, 0);  // the checks below see refusals too
  }
}

// The enumeration's non-throwing checks (parallel_refusal, structure_refusal)
// refuse exactly what check_parallel and count_step_ops throw for, with the
// same message: every point of a 16-GPU, two-node space (uneven hierarchical
// groups, windows, partitions that do not divide the sequence).
TEST(PlanSpace, RefusalsWithoutThrowingAreTheThrowingChecks) {
  const Experiment base = small({"cluster.nodes=2", "workload.seq_len=24k"});
  int64_t refused = 0, structural = 0, points = 0;
  for (int cp : {1, 2, 3, 4, 6, 8, 12, 16})
    for (int hp : {1, 2, 4})
      for (RingKind ring : {RingKind::ring, RingKind::double_ring, RingKind::hierarchical})
        for (PlacementOrder pl : {PlacementOrder::head_first, PlacementOrder::context_first, PlacementOrder::interleaved})
          for (int window : {1, 2, 3}) {
            if (cp * hp > 16) continue;
            Experiment e = base;
            Layout l = layout_of(base);
            l.cp = cp, l.hp = hp, l.dp = 1, l.ring = ring, l.placement = pl, l.window = window;
            l.partition = Partition::zigzag;
            assign_layout(e, l);
            ++points;
            std::string thrown;
            try {
              check_parallel(e);
            } catch (const ConfigError& err) {
              thrown = err.what();
            }
            EXPECT_EQ(parallel_refusal(e), thrown) << layout_label(l);
            refused += !thrown.empty();
            if (!thrown.empty()) continue;
            std::string generator;
            try {
              (void)generate::count_step_ops(e);
            } catch (const ConfigError& err) {
              generator = err.what();
            }
            EXPECT_EQ(generate::structure_refusal(e), generator) << layout_label(l);
            structural += !generator.empty();
          }
  EXPECT_GT(refused, 0);
  EXPECT_GT(structural, 0);  // uneven hierarchical groups were among them
  EXPECT_GT(points - refused - structural, 0);
}

// A space above max_layouts is refused before it is enumerated (the CLI's
// 100,000-node case is CliPlan.AnEnormousClusterIsAnsweredAtOnce), and the
// enumeration reports its progress against the count.
TEST(Plan, ASpaceAboveTheLimitIsRefusedBeforeEnumerating) {
  PlanOptions o = options(true);
  const SpaceSize n = count_space(small(), o.space);
  std::vector<std::string> stages;
  o.progress = [&](const std::string& stage, int64_t, int64_t) { stages.push_back(stage); };
  auto refusal = [&](const PlanOptions& x) -> std::string {
    try {
      plan(small(), store(), x);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "not refused";
  };
  PlanOptions by_count = o;
  by_count.max_layouts = n.layouts - 1;
  const std::string counted = refusal(by_count);
  EXPECT_NE(counted.find(fmt::format("holds {} layouts ({} hierarchical", n.layouts, n.hierarchical)), std::string::npos)
      << counted;
  EXPECT_NE(counted.find(fmt::format("above the planner's limits ({} layouts", n.layouts - 1)), std::string::npos) << counted;
  EXPECT_NE(counted.find("--fix KEY"), std::string::npos) << counted;
  PlanOptions by_time = o;  // the estimate alone refuses too
  by_time.max_enumeration_s = enumeration_seconds(n, 4) / 2;
  EXPECT_NE(refusal(by_time).find("above the planner's limits"), std::string::npos);
  EXPECT_TRUE(stages.empty());  // nothing was enumerated
  int64_t last_done = -1, total = -1;
  const Space s = enumerate_space(small(), o.space, [&](int64_t done, int64_t t) {
    EXPECT_GE(done, last_done);
    last_done = done, total = t;
  });
  EXPECT_EQ(total, n.layouts);
  EXPECT_EQ(last_done, s.enumerated);
}

TEST(Plan, ReasonNamesTheLargestCause) {
  PlanCandidate w, c;
  w.tokens = c.tokens = 1000;
  w.analytic.ok = c.analytic.ok = true;
  w.analytic.report.step_time_s = 1.0;
  w.analytic.report.breakdown.mean = {-1, 0.8, 0.2, 0.0};
  c.analytic.report.step_time_s = 1.5;
  c.analytic.report.breakdown.mean = {-1, 0.85, 0.6, 0.05};
  EXPECT_NE(reason_lost(c, w).find("exposed communication"), std::string::npos) << reason_lost(c, w);
  EXPECT_EQ(reason_lost(c, w).rfind("+50.00%", 0), 0u) << reason_lost(c, w);
  c.analytic.report.breakdown.mean = {-1, 0.85, 0.2, 0.45};
  EXPECT_NE(reason_lost(c, w).find("idle"), std::string::npos) << reason_lost(c, w);
  // Per token: a dp = 2 layout's 1.5 s step carries twice the tokens, so it is faster, not slower.
  c.tokens = 2000;
  c.layout.dp = 2;
  EXPECT_EQ(reason_lost(c, w), "ties with the winner");
}

}  // namespace
}  // namespace rm::search
