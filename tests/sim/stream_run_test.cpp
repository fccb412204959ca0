// Streaming (sim/engine/stream_run.hpp, report/stream_report.hpp, docs/engines.md
// "Streaming") against the whole run on cases small enough to run both: the
// chunks are generate_step's ops op for op, every op's start and end equal the
// whole analytic run's bit for bit, and the streamed report equals
// fast_step_report's figures exactly. Where an op arrives after it could have
// started (ZeRO-3's prefetch, a Schedule cut anywhere) the run must refuse
// rather than answer differently: random cuts of random Schedules either equal
// the whole run or throw StreamNotExact. The critical path the run traces as
// ops end is the chain report::critical_chain walks back on the whole run, and
// the bound-by gathered as chunks retire is the whole run's, link for link.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/stream_run.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/report/stream_bound_by.hpp"
#include "sim/report/stream_report.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "tests/support/bound_by_compare.hpp"
#include "tests/support/generate_support.hpp"
#include "tests/support/symmetry_cases.hpp"
#include "tests/support/synthetic_schedules.hpp"

namespace rm::engine {
namespace {

using schedule::OpId;
using schedule::OpKind;
using test::joined;

// The cluster the hand-built Schedules run on.
struct SmallCluster {
  Cluster cluster = [] {
    auto cfg = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "test");
    return parse_cluster(JsonReader(cfg.json, cfg.source));
  }();
  topology::Topology topo{cluster};
  cost::CostModel model{cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu)};
};

// What a streamed run gave: every op's times by id, and how many chunks came back.
struct Streamed {
  OpTimes times;
  int retired = 0;
  StreamRun::Stats stats;
  std::optional<std::vector<schedule::PathLink>> chain;
  std::optional<report::BoundBy> bound_by;  // gathered as chunks retired (with the chain)
};

// Bound-by figure for figure: every link's sums and unions, the classes, the phases, the verdict.
void expect_same_bound_by(const report::BoundBy& whole, const report::BoundBy& streamed) {
  EXPECT_EQ(report::to_json(whole).dump(), report::to_json(streamed).dump());
  test::expect_same_links(whole, streamed);
}

// The critical path of the whole run, as the report walks it.
std::vector<schedule::PathLink> whole_chain(const schedule::Schedule& s, const OpTimes& t) {
  const schedule::RunPlan plan(s);
  const report::EdgeGraph g(schedule::timeline_edges(s, plan), s.ops.size());
  return report::critical_chain(s, g, report::OpSpans{t.start, t.end, {}});
}

void expect_same_chain(const std::vector<schedule::PathLink>& whole, const std::vector<schedule::PathLink>& streamed) {
  ASSERT_EQ(whole.size(), streamed.size());
  for (size_t i = 0; i < whole.size(); ++i)
    ASSERT_TRUE(whole[i] == streamed[i]) << "link " << i << ": whole op " << whole[i].op << " via " << whole[i].via
                                         << ", streamed op " << streamed[i].op << " via " << streamed[i].via;
}

// Appends a chunk's entries to `all` and points its ops at them there.
void gather_entries(schedule::OpChunk& c, std::vector<schedule::OpDesc>& all) {
  const auto base = int32_t(all.size());
  for (auto& op : c.ops)
    if (op.desc >= 0) op.desc += base;
  all.insert(all.end(), c.descs.begin(), c.descs.end());
}

// Streams `chunks` (ops with consecutive ids) of a Schedule whose frame is `meta`.
Streamed stream(const schedule::Schedule& meta, const std::vector<std::vector<schedule::Op>>& chunks,
                const topology::Topology& topo, const cost::CostModel& cost) {
  Streamed out;
  std::vector<std::pair<size_t, double>> safe;  // (ops handed back before, safe_before)
  report::StreamBoundBy bound_by(meta, topo, cost);
  StreamRun run(topo, cost, [&](const RetiredChunk& c) {
    ++out.retired;
    bound_by.add(c.ops, c.descs, c.start, c.end, c.groups, c.safe_before);
    for (size_t i = 0; i < c.ops.size(); ++i) {
      EXPECT_EQ(c.ops[i].id, OpId(out.times.start.size()));
      out.times.start.push_back(c.start[i]);
      out.times.end.push_back(c.end[i]);
    }
    safe.emplace_back(out.times.start.size(), c.safe_before);
  });
  for (size_t k = 0; k < chunks.size(); ++k) run.append(meta, chunks[k], k + 1 == chunks.size());
  out.stats = run.stats();
  std::vector<schedule::PathTransfer> transfers;
  out.chain = run.critical_chain(&transfers);
  if (out.chain) {
    double begin = 0, end = 0;
    for (size_t i = 0; i < out.times.start.size(); ++i)
      begin = i ? std::min(begin, out.times.start[i]) : out.times.start[i], end = std::max(end, out.times.end[i]);
    out.bound_by = bound_by.finish(report::critical_path(*out.chain), *out.chain, transfers, end - begin, 1.0);
  }
  // safe_before holds: no op handed back later started before it (the report's sweep relies on it).
  for (const auto& [from, before] : safe)
    for (size_t i = from; i < out.times.start.size(); ++i)
      if (out.times.start[i] < before) {
        ADD_FAILURE() << "op " << i << " starts at " << out.times.start[i] << ", before safe_before " << before;
        break;
      }
  return out;
}

void expect_same_times(const OpTimes& whole, const OpTimes& streamed) {
  ASSERT_EQ(whole.start.size(), streamed.start.size());
  int differ = 0;
  for (size_t i = 0; i < whole.start.size(); ++i)
    if (whole.start[i] != streamed.start[i] || whole.end[i] != streamed.end[i])
      if (++differ <= 3)
        ADD_FAILURE() << "op " << i << ": whole " << whole.start[i] << " .. " << whole.end[i] << ", streamed "
                      << streamed.start[i] << " .. " << streamed.end[i];
  EXPECT_EQ(differ, 0);
}

// The generated step, whole and streamed (with the data-parallel shortcut when one).
void expect_streams_exactly(const std::vector<std::string>& sets, bool one = false) {
  SCOPED_TRACE(joined(sets));
  const Experiment e = test::symmetry_experiment(sets);
  pipeline::Session session;
  const schedule::Schedule whole = one ? test::one_replica(session, e) : session.schedule(e);
  const auto& topo = session.topology(e);
  const auto cost = cost::CostModel::for_experiment(e);

  const OpTimes t = run_analytic(whole, topo, cost);
  const auto replicas = one ? generate::Replicas::one : generate::Replicas::all;
  // Cut at layer boundaries, and (where that applies) after every ring step too.
  for (bool ring_steps : {false, true}) {
    if (ring_steps && !generate::ring_step_cuts_apply(e, replicas)) continue;
    SCOPED_TRACE(ring_steps ? "ring-step chunks" : "layer chunks");
    // The chunks are the whole Schedule's ops, in order.
    // Each chunk carries its own descriptor entries: gathered into meta.descs here.
    std::vector<std::vector<schedule::Op>> chunks;
    schedule::Schedule meta;
    std::vector<schedule::OpDesc> descs;
    generate::generate_step_chunks(
        e, session.patterns(e), topo, &session.work(), replicas,
        [&](const schedule::Schedule& m, schedule::OpChunk c, bool) {
          EXPECT_TRUE(m.descs.empty());  // the builder keeps no entry of ops handed out
          gather_entries(c, descs);
          chunks.push_back(std::move(c.ops));
          meta = m;
        },
        ring_steps);
    meta.descs = descs;
    std::vector<schedule::Op> all;
    for (const auto& c : chunks) all.insert(all.end(), c.begin(), c.end());
    ASSERT_EQ(all.size(), whole.ops.size());
    // One replica's Schedule is costable-only (Session::one_replica_schedule): no accesses to compare.
    for (size_t i = 0; i < all.size(); ++i) {
      rm::testing::ResolvedOp got = rm::testing::resolved(all[i], descs);
      if (whole.accesses.empty()) got.d.access = -1;
      ASSERT_TRUE(got == rm::testing::resolved(whole, whole.ops[i])) << schedule::describe(whole, OpId(i));
    }
    if (!ring_steps) {  // without accesses (what a streamed simulation asks for): the same ops, access -1
      std::vector<schedule::Op> bare;
      std::vector<schedule::OpDesc> bare_descs;
      bool empty_table = true;
      generate::generate_step_chunks(
          e, session.patterns(e), topo, &session.work(), replicas,
          [&](const schedule::Schedule& m, schedule::OpChunk c, bool) {
            gather_entries(c, bare_descs);
            bare.insert(bare.end(), c.ops.begin(), c.ops.end());
            empty_table = empty_table && m.accesses.empty();
          },
          false, generate::Accesses::none);
      EXPECT_TRUE(empty_table);
      generate::testing::expect_ops_without_accesses(whole, bare, bare_descs);
    }
    if (e.scope == Scope::step) {
      EXPECT_GE(chunks.size(), size_t((ring_steps ? e.parallel.cp : 2) * e.model.layers));
    }
    meta.ops.clear();
    const Streamed s = stream(meta, chunks, topo, cost);
    expect_same_times(t, s.times);
    ASSERT_TRUE(s.chain.has_value());
    expect_same_chain(whole_chain(whole, t), *s.chain);
    EXPECT_GT(s.chain->size(), size_t(2));
    EXPECT_EQ(s.retired, int(std::count_if(chunks.begin(), chunks.end(), [](const auto& c) { return !c.empty(); })));
    if (e.scope == Scope::step) {
      EXPECT_LT(s.stats.peak_ops_held, int64_t(whole.ops.size()));  // never the whole step at once
    }
  }

  // The report, figure for figure.
  const auto whole_rep = pipeline::simulate_schedule(e, whole, topo, EngineKind::analytic, pipeline::WithTimeline::no).report;
  const auto streamed = session.simulate_streamed(e, one);
  EXPECT_EQ(streamed.ring_step_chunks, generate::ring_step_cuts_apply(e, replicas));
  const auto& sr = streamed.report;
  EXPECT_EQ(sr.step_time_s, whole_rep.step_time_s);
  EXPECT_EQ(sr.tokens_per_s, whole_rep.tokens_per_s);
  EXPECT_EQ(sr.gpus, whole_rep.gpus);
  EXPECT_EQ(sr.model_flops, whole_rep.model_flops);
  EXPECT_EQ(sr.executed_flops, whole_rep.executed_flops);
  EXPECT_EQ(sr.mfu, whole_rep.mfu);
  EXPECT_EQ(sr.hfu, whole_rep.hfu);
  EXPECT_EQ(sr.imbalance.worker, whole_rep.imbalance.worker);
  EXPECT_EQ(sr.imbalance.step, whole_rep.imbalance.step);
  EXPECT_EQ(sr.imbalance.step_measured, whole_rep.imbalance.step_measured);
  ASSERT_EQ(sr.breakdown.per_rank.size(), whole_rep.breakdown.per_rank.size());
  for (size_t r = 0; r < sr.breakdown.per_rank.size(); ++r) {
    EXPECT_EQ(sr.breakdown.per_rank[r].compute_s, whole_rep.breakdown.per_rank[r].compute_s) << "rank " << r;
    EXPECT_EQ(sr.breakdown.per_rank[r].exposed_comm_s, whole_rep.breakdown.per_rank[r].exposed_comm_s) << "rank " << r;
    EXPECT_EQ(sr.breakdown.per_rank[r].idle_s, whole_rep.breakdown.per_rank[r].idle_s) << "rank " << r;
  }
  EXPECT_EQ(sr.breakdown.mean.idle_s, whole_rep.breakdown.mean.idle_s);
  EXPECT_EQ(sr.memory.peak_bytes, whole_rep.memory.peak_bytes);
  ASSERT_TRUE(sr.critical_path_traced);
  const auto& cp = sr.critical_path;
  const auto& wcp = whole_rep.critical_path;
  EXPECT_EQ(cp.ops, wcp.ops);
  EXPECT_EQ(cp.length_s, wcp.length_s);
  EXPECT_EQ(cp.compute_s, wcp.compute_s);
  EXPECT_EQ(cp.communication_s, wcp.communication_s);
  EXPECT_EQ(cp.waiting_s, wcp.waiting_s);
  ASSERT_EQ(cp.by_kind.size(), wcp.by_kind.size());
  for (size_t k = 0; k < cp.by_kind.size(); ++k) {
    EXPECT_EQ(cp.by_kind[k].kind, wcp.by_kind[k].kind);
    EXPECT_EQ(cp.by_kind[k].phase, wcp.by_kind[k].phase);
    EXPECT_EQ(cp.by_kind[k].seconds, wcp.by_kind[k].seconds);
    EXPECT_EQ(cp.by_kind[k].ops, wcp.by_kind[k].ops);
  }
  EXPECT_GT(cp.length_s, 0.0);
  ASSERT_TRUE(sr.bound_by.has_value());
  ASSERT_TRUE(whole_rep.bound_by.has_value());
  expect_same_bound_by(*whole_rep.bound_by, *sr.bound_by);
}

TEST(StreamRun, GeneratedStepsStreamExactly) {
  expect_streams_exactly({"scope=step"});
  expect_streams_exactly({"scope=step", "parallel.cp=8", "parallel.dp=4"});
  expect_streams_exactly({"scope=step", "parallel.cp=4", "parallel.hp=2", "parallel.dp=4", "parallel.zero_stage=1"});
  expect_streams_exactly({"scope=step", "parallel.cp=8", "parallel.dp=2", "parallel.zero_stage=2", "parallel.checkpoint=full"});
  // ZeRO-3's gathers wait only for their stream: each arrives while the one before is still running.
  expect_streams_exactly({"scope=step", "parallel.cp=4", "parallel.dp=4", "parallel.zero_stage=3"});
  expect_streams_exactly({"scope=step", "parallel.cp=4", "parallel.tp=2", "parallel.dp=4", "parallel.checkpoint=selective"});
  expect_streams_exactly({"scope=step", "parallel.cp=8", "parallel.hp=4", "parallel.ring=double_ring", "parallel.window=2"});
  expect_streams_exactly({"scope=step", "parallel.cp=16", "parallel.dp=2", "parallel.partition=zigzag", "parallel.ring=ring"});
  expect_streams_exactly({"scope=step", "parallel.cp=1", "parallel.hp=8", "parallel.dp=4"});  // Ulysses
  expect_streams_exactly({"scope=step", "parallel.cp=8", "parallel.dp=4", "workload.pattern=dense-causal",
                          "parallel.partition=zigzag", "parallel.ring=ring"});
  expect_streams_exactly({"scope=layer"});
  expect_streams_exactly({"scope=attention_fwd_bwd", "parallel.cp=8", "parallel.dp=4"});
}

TEST(StreamRun, OneReplicaStepsStreamExactly) {
  expect_streams_exactly({"scope=step", "parallel.dp=4", "parallel.cp=8"}, true);
  expect_streams_exactly({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.hp=2", "parallel.zero_stage=1"}, true);
  expect_streams_exactly({"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=3"}, true);
}

// The generator on a thread of its own, ahead of the engine (Session threads > 1):
// the same chunks in the same order, so the same report and the same run.
TEST(StreamRun, AGeneratorOnItsOwnThreadGivesTheSameRun) {
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"scope=step"},
           {"scope=step", "parallel.cp=8", "parallel.dp=4"},  // several context groups: layer chunks
           {"scope=step", "parallel.dp=2", "parallel.cp=4", "parallel.zero_stage=3"}}) {
    SCOPED_TRACE(joined(sets));
    const Experiment e = test::symmetry_experiment(sets);
    pipeline::Session one, two;
    two.set_threads(2);
    int64_t calls = 0, last = 0;
    const auto a = one.simulate_streamed(e, false);
    const auto b = two.simulate_streamed(e, false, [&](int64_t ops) {
      EXPECT_GT(ops, last);
      last = ops, ++calls;
    });
    EXPECT_EQ(report::to_json(a.report).dump(), report::to_json(b.report).dump());
    EXPECT_EQ(a.stats.chunks, b.stats.chunks);
    EXPECT_EQ(a.stats.peak_ops_held, b.stats.peak_ops_held);
    EXPECT_EQ(a.ring_step_chunks, b.ring_step_chunks);
    EXPECT_EQ(calls, b.stats.chunks);
    EXPECT_EQ(last, b.stats.ops);
  }
}

// Either side's failure stops the other and reaches the caller: the generator's
// (a window that does not divide cp, set past the loader's check) and the engine's
// (a route that does not translate, below).
TEST(StreamRun, AGeneratorThreadsFailureReachesTheCaller) {
  Experiment e = test::symmetry_experiment({"scope=step", "parallel.ring=double_ring", "parallel.window=2"});
  e.parallel.window = 3;
  pipeline::Session session;
  session.set_threads(2);
  // What runs on the caller's thread before the generator's starts does not refuse it.
  ASSERT_NO_THROW(generate::ring_step_cuts_apply(e, generate::Replicas::all));
  ASSERT_NO_THROW(session.patterns(e));
  ASSERT_NO_THROW(session.topology(e));
  try {
    session.simulate_streamed(e, false);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& x) {
    EXPECT_NE(std::string(x.what()).find("window"), std::string::npos) << x.what();
  }
}

// Where the shortcut's routes are not translates the streamed run says so rather
// than answer: DGX-1's 1 -> 2 is one NVLink, its translate 3 -> 4 is not.
TEST(StreamRun, OneReplicaRefusesRoutesThatAreNotTranslates) {
  const Experiment e = test::symmetry_experiment(
      {"scope=step", "parallel.dp=4", "parallel.cp=2", "cluster=v100-dgx1-1x8", "cluster.gpu.model=A100-SXM4-80GB",
       "cluster.gpu.peak_tflops_bf16=312", "kernel.attention=fa2", "workload.pattern=dense-causal"});
  for (int threads : {1, 2}) {
    pipeline::Session session;
    session.set_threads(threads);
    ASSERT_EQ(generate::replica_refusal(e, session.topology(e)), "");
    try {
      session.simulate_streamed(e, true);
      FAIL() << "expected ScheduleError";
    } catch (const schedule::ScheduleError& x) {
      EXPECT_NE(std::string(x.what()).find("not exact"), std::string::npos) << x.what();
    }
  }
}

// An op that arrives after everything holding it back has ended would have
// started in the past: refused, naming the op.
TEST(StreamRun, RefusesAnOpThatArrivesLate) {
  schedule::ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_stream(b.add_rank(r), schedule::StreamKind::compute);
  b.compute(0, 0, schedule::OpKind::gemm, {}, {1e12, 0, 1});
  b.compute(1, 0, schedule::OpKind::gemm, {}, {1e12, 0, 1});  // depends on nothing: starts at 0
  const schedule::Schedule s = std::move(b).build();
  const SmallCluster sc;
  const auto& topo = sc.topo;
  const auto& model = sc.model;
  schedule::Schedule meta = s;
  meta.ops.clear();
  // Whole: both at once. Cut after op 0: op 1 comes once op 0 is about to end.
  EXPECT_EQ(stream(meta, {s.ops}, topo, model).times.start, (std::vector<double>{0.0, 0.0}));
  try {
    stream(meta, {{s.ops[0]}, {s.ops[1]}}, topo, model);
    FAIL() << "expected StreamNotExact";
  } catch (const StreamNotExact& x) {
    EXPECT_NE(std::string(x.what()).find("op 1 (rank 1"), std::string::npos) << x.what();
    EXPECT_NE(std::string(x.what()).find("simulate it whole"), std::string::npos) << x.what();
  }
}

// A run that launches when two of its waits end at the same time takes the
// first in its order, as the whole walk does, even when that one's chunk was
// handed back (retired) between the two ends: g0 and g1 both end at L + D, g0's
// chunk retires as g0 ends, then g1's end launches x, which waited for g0 first.
TEST(StreamRun, TheCriticalPathTakesTheFirstOfTiedWaitsFromARetiredChunk) {
  schedule::ScheduleBuilder b;
  const int r = b.add_rank(0);
  for (int k = 0; k < 3; ++k) b.add_stream(r, schedule::StreamKind::compute, "c" + std::to_string(k));  // side by side
  const OpId z0 = b.compute(r, 0, schedule::OpKind::gemm, {}, {0, 0, 1});
  const OpId g0 = b.compute(r, 0, schedule::OpKind::gemm, {}, {1e12, 0, 1});
  b.compute(r, 1, schedule::OpKind::gemm, {}, {0, 0, 1});
  const OpId g1 = b.compute(r, 1, schedule::OpKind::gemm, {}, {1e12, 0, 1});
  const OpId x = b.compute(r, 2, schedule::OpKind::gemm, {}, {1e12, 0, 1}, {g0, g1});
  const schedule::Schedule s = std::move(b).build();
  const SmallCluster sc;
  const auto& topo = sc.topo;
  const auto& model = sc.model;
  schedule::Schedule meta = s;
  meta.ops.clear();
  const OpTimes whole = run_analytic(s, topo, model);
  ASSERT_EQ(whole.end[size_t(g0)], whole.end[size_t(g1)]);  // the tie
  const Streamed st = stream(meta, {{s.ops.begin(), s.ops.begin() + 3}, {s.ops.begin() + 3, s.ops.end()}}, topo, model);
  expect_same_times(whole, st.times);
  ASSERT_TRUE(st.chain.has_value());
  const auto chain = whole_chain(s, whole);
  ASSERT_EQ(chain.size(), size_t(3));
  EXPECT_EQ(chain[0].op, x);
  EXPECT_EQ(chain[1].op, g0);
  EXPECT_EQ(chain[2].op, z0);
  expect_same_chain(chain, *st.chain);
}

// Random Schedules cut at random places: equal to the whole run, or refused.
TEST(StreamRun, RandomCutsEqualTheWholeRunOrAreRefused) {
  const SmallCluster sc;
  const auto& topo = sc.topo;
  const auto& model = sc.model;
  std::mt19937_64 rng(7);
  int exact = 0, refused = 0, traced = 0;
  for (int round = 0; round < 60; ++round) {
    const schedule::Schedule s = round % 3 == 2 ? ring_schedule({8, 0, 20, 3e10, 1 << 20, 5})
                                                : random_schedule({uint64_t(round + 1), 6 + round % 11, 300});
    const OpTimes whole = run_analytic(s, topo, model);
    // Cuts: a few random ones (sometimes none: one chunk must always be exact).
    std::vector<size_t> cuts{0};
    const int n_cuts = round % 4 == 0 ? 0 : 1 + int(rng() % 6);
    for (int k = 0; k < n_cuts; ++k) cuts.push_back(1 + rng() % (s.ops.size() - 1));
    cuts.push_back(s.ops.size());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<std::vector<schedule::Op>> chunks;
    for (size_t k = 0; k + 1 < cuts.size(); ++k)
      chunks.emplace_back(s.ops.begin() + std::ptrdiff_t(cuts[k]), s.ops.begin() + std::ptrdiff_t(cuts[k + 1]));
    schedule::Schedule meta = s;
    meta.ops.clear();
    try {
      const Streamed st = stream(meta, chunks, topo, model);
      expect_same_times(whole, st.times);
      ++exact;
      // The traced path is the whole walk's, or (where ties of the walk's skipping could matter) none.
      if (st.chain) {
        const auto chain = whole_chain(s, whole);
        expect_same_chain(chain, *st.chain);
        ++traced;
        const traces::Timeline tl = to_timeline(s, whole, traces::Source::analytic);
        ASSERT_TRUE(st.bound_by.has_value());
        expect_same_bound_by(report::bound_by(s, tl, topo, model, report::critical_path(chain), 1.0), *st.bound_by);
      }
      if (n_cuts == 0) {
        EXPECT_EQ(st.stats.chunks, 1);
      }
    } catch (const StreamNotExact&) {
      EXPECT_GT(n_cuts, 0) << "one chunk is the whole run: it is always exact";
      ++refused;
    }
  }
  // Both outcomes occur, so the oracle compares something either way.
  EXPECT_GT(exact, 15);
  EXPECT_GT(refused, 0);
  EXPECT_GT(traced, 15);
}

// Many sends of one (sender, receiver, tag) before any receive: each receive
// pairs with the oldest send still unmatched, as the whole run pairs them.
// Send k carries k + 1 units, so any other pairing would move every end; 150
// of them keep a long queue waiting on one key.
TEST(StreamRun, ATagSentAgainBeforeItsPairMatchedPairsOldestFirst) {
  const SmallCluster sc;
  schedule::ScheduleBuilder b;
  const int r0 = b.add_rank(0), r1 = b.add_rank(9);  // GPUs on two nodes
  const int s0 = b.add_stream(r0, schedule::StreamKind::comm_inter);
  const int s1 = b.add_stream(r1, schedule::StreamKind::comm_inter);
  auto p2p_op = [&](int rank, int stream, OpKind kind, int peer, int64_t bytes) {
    schedule::Op o;
    o.rank = rank, o.stream = int16_t(stream), o.kind = kind, o.peer = peer, o.tag = 5;
    return b.add_op(o, {0.0, 0, 0, bytes});
  };
  const int n = 150;
  for (int k = 0; k < n; ++k) p2p_op(r0, s0, OpKind::send, r1, int64_t(k + 1) << 16);
  for (int k = 0; k < n; ++k) p2p_op(r1, s1, OpKind::recv, r0, int64_t(k + 1) << 16);
  const schedule::Schedule s = std::move(b).build();
  const OpTimes whole = run_analytic(s, sc.topo, sc.model);
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(whole.end[size_t(k)], whole.end[size_t(n + k)]) << "pair " << k;  // send k and receive k
    if (k > 0) {
      EXPECT_GT(whole.end[size_t(k)] - whole.start[size_t(k)], whole.end[size_t(k - 1)] - whole.start[size_t(k - 1)]);
    }
  }
  schedule::Schedule meta = s;
  meta.ops.clear();
  const Streamed st = stream(meta, {s.ops}, sc.topo, sc.model);
  expect_same_times(whole, st.times);
}

TEST(StreamRun, ChunksMustContinueTheIds) {
  const schedule::Schedule s = ring_schedule({4, 0, 3, 1e10, 1 << 20, 0});
  const SmallCluster sc;
  const auto& topo = sc.topo;
  const auto& model = sc.model;
  StreamRun run(topo, model, [](const RetiredChunk&) {});
  schedule::Schedule meta = s;
  meta.ops.clear();
  std::vector<schedule::Op> late(s.ops.begin() + 1, s.ops.end());
  EXPECT_THROW(run.append(meta, late, true), std::invalid_argument);
}

TEST(ScheduleBuilder, TakeOpsHandsOutOpsAndKeepsIdsGlobal) {
  schedule::ScheduleBuilder b;
  const int r = b.add_rank(0);
  const int st = b.add_stream(r, schedule::StreamKind::compute);
  const OpId a = b.compute(r, st, schedule::OpKind::gemm, {}, {1e9, 0, 1});
  const OpId c = b.compute(r, st, schedule::OpKind::gemm, {}, {1e9, 0, 1}, {a});
  auto first = b.take_ops();
  ASSERT_EQ(first.ops.size(), 2u);
  EXPECT_EQ(first.ops[1].id, c);
  ASSERT_EQ(first.descs.size(), 1u);  // the two ops share their entry, handed out with them
  EXPECT_EQ(first.ops[1].desc, 0);
  EXPECT_EQ(first.descs[0].flops, 1e9);
  EXPECT_TRUE(b.peek().descs.empty());
  EXPECT_EQ(b.next_op_id(), 2);
  const OpId d = b.compute(r, st, schedule::OpKind::gemm, {}, {1e9, 0, 1}, {c});  // a handed-out dep is fine
  EXPECT_EQ(d, 2);
  EXPECT_THROW(b.add_dep(c, a), std::invalid_argument);                // a handed-out op is not changed
  EXPECT_THROW(b.set_gemm(a, {1, 1, 1}), std::invalid_argument);
  EXPECT_THROW(b.compute(r, st, schedule::OpKind::gemm, {}, {}, {7}), std::invalid_argument);  // no op 7 yet
  EXPECT_THROW(std::move(b).build(), std::invalid_argument);           // not whole any more
}

}  // namespace
}  // namespace rm::engine
