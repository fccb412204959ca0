// The step report on a hand-made Schedule and Timeline whose every figure is
// worked out below, the model-FLOPs formula against a hand count, and
// invariants of the report on generated schedules run by the analytic engine.
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/model_flops.hpp"
#include "sim/engine/engine.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/report/imbalance.hpp"
#include "sim/report/step_report.hpp"
#include "sim/sparsity/count.hpp"
#include "sim/sparsity/sparsity_model.hpp"

namespace rm::report {
namespace {

using schedule::OpKind;
using schedule::Phase;
using schedule::StreamKind;

// Two ranks, each with a compute stream (0) and a comm stream (1).
//   op 0  r0 compute  attn_fwd step 0, 4 blocks        [0, 2]
//   op 1  r1 compute  attn_fwd step 0, 2 blocks        [0, 1]
//   op 2  r0 comm     send to r1, after op 0           [2, 5]
//   op 3  r1 comm     recv from r0 (posted at once)    [0, 5]
//   op 4  r1 compute  attn_fwd step 1, 6 blocks, after op 3   [5, 8]
//   op 5  r0 compute  attn_fwd step 1, 2 blocks        [3, 4.5]
traces::Event event(const schedule::Op& op, double start, double end) {
  traces::Event e;
  e.op = op.id;
  e.rank = op.rank;
  e.stream = op.stream;
  e.start_s = start;
  e.end_s = end;
  return e;
}

struct Hand {
  Experiment e;
  schedule::Schedule s;
  traces::Timeline tl;
};

Hand hand() {
  Hand h;
  // Scope attention_fwd. Dense causal model FLOPs: 4 * head_dim * heads * S(S+1)/2 = 4 * 55 = 220;
  // the mask's: what the forward attention ops carry, 10 per block, 140 in all. Tiles of 4 x 4
  // execute 4 * 4 * 4 * head_dim = 64 FLOPs each, 14 tiles: 896.
  h.e.model.heads = 1;
  h.e.model.kv_heads = 1;
  h.e.model.head_dim = 1;
  h.e.model.layers = 1;
  h.e.workload.seq_len = 10;
  h.e.workload.block_q = 4;
  h.e.workload.block_k = 4;
  h.e.scope = Scope::attention_fwd;
  h.e.cluster.gpu.peak_tflops_bf16 = 1e-10;  // 100 FLOP/s per GPU
  for (int r = 0; r < 2; ++r)
    h.s.ranks.push_back({r, r, {{0, StreamKind::compute, "compute"}, {1, StreamKind::comm_intra, "comm"}}});
  auto add = [&](int rank, int stream, OpKind kind, int step, int64_t blocks, double flops, std::vector<int64_t> deps,
                 double start, double end) {
    schedule::Op op;
    op.id = int64_t(h.s.ops.size());
    op.rank = rank;
    op.stream = stream;
    op.kind = kind;
    op.layer = 0;
    op.step = step;
    op.deps = std::move(deps);
    const bool p2p = kind == OpKind::send || kind == OpKind::recv;
    if (p2p) op.peer = 1 - rank;
    h.s.set_desc(op, {flops, blocks, 0, p2p ? 100 : 0});
    h.s.ops.push_back(op);
    h.tl.events.push_back(event(op, start, end));
  };
  add(0, 0, OpKind::attn_fwd, 0, 4, 40, {}, 0, 2);
  add(1, 0, OpKind::attn_fwd, 0, 2, 20, {}, 0, 1);
  add(0, 1, OpKind::send, 0, 0, 0, {0}, 2, 5);
  add(1, 1, OpKind::recv, 0, 0, 0, {}, 0, 5);
  add(1, 0, OpKind::attn_fwd, 1, 6, 60, {3}, 5, 8);
  add(0, 0, OpKind::attn_fwd, 1, 2, 20, {}, 3, 4.5);
  h.tl.edges = engine::timeline_edges(h.s, schedule::RunPlan(h.s));  // what the engines add
  return h;
}

TEST(StepReport, HeadlineFiguresOfAHandMadeStep) {
  const Hand h = hand();
  const StepReport r = make_step_report(h.e, h.s, h.tl);
  EXPECT_EQ(r.gpus, 2);
  EXPECT_DOUBLE_EQ(r.step_time_s, 8);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 10.0 / 8);
  EXPECT_DOUBLE_EQ(r.model_flops, 140);
  EXPECT_DOUBLE_EQ(r.dense_causal_model_flops, 220);
  EXPECT_DOUBLE_EQ(r.executed_flops, 896);
  // Denominator: 8 s x 2 GPUs x 100 FLOP/s = 1600.
  EXPECT_DOUBLE_EQ(r.mfu, 140.0 / 1600);
  EXPECT_DOUBLE_EQ(r.hfu, 896.0 / 1600);
  EXPECT_DOUBLE_EQ(r.dense_equivalent_speedup, 220.0 / 140);
}

TEST(StepReport, BreakdownSeparatesOverlappedExposedAndIdleTime) {
  const Hand h = hand();
  const Breakdown b = make_step_report(h.e, h.s, h.tl).breakdown;
  ASSERT_EQ(b.per_rank.size(), 2u);
  // Rank 0: compute [0,2] + [3,4.5]; the send [2,5] is exposed on [2,3] and [4.5,5]; idle [5,8].
  EXPECT_DOUBLE_EQ(b.per_rank[0].compute_s, 3.5);
  EXPECT_DOUBLE_EQ(b.per_rank[0].exposed_comm_s, 1.5);
  EXPECT_DOUBLE_EQ(b.per_rank[0].idle_s, 3);
  // Rank 1: compute [0,1] + [5,8]; the recv [0,5] is exposed on [1,5]; never idle.
  EXPECT_DOUBLE_EQ(b.per_rank[1].compute_s, 4);
  EXPECT_DOUBLE_EQ(b.per_rank[1].exposed_comm_s, 4);
  EXPECT_DOUBLE_EQ(b.per_rank[1].idle_s, 0);
  EXPECT_DOUBLE_EQ(b.mean.compute_s, 3.75);
  EXPECT_DOUBLE_EQ(b.mean.exposed_comm_s, 2.75);
  EXPECT_DOUBLE_EQ(b.mean.idle_s, 1.5);
  EXPECT_DOUBLE_EQ(b.max.compute_s, 4);
  EXPECT_DOUBLE_EQ(b.max.exposed_comm_s, 4);
  EXPECT_DOUBLE_EQ(b.max.idle_s, 3);
  EXPECT_DOUBLE_EQ(b.min.compute_s, 3.5);
  EXPECT_DOUBLE_EQ(b.min.exposed_comm_s, 1.5);
  EXPECT_DOUBLE_EQ(b.min.idle_s, 0);
}

TEST(StepReport, ImbalancePlannedFromBlocksAndMeasuredFromDurations) {
  const Hand h = hand();
  const Imbalance im = make_step_report(h.e, h.s, h.tl).imbalance;
  // Blocks: r0 = (4, 2), r1 = (2, 6); totals 6 and 8, mean 7.
  EXPECT_DOUBLE_EQ(im.worker, 8.0 / 7);
  EXPECT_DOUBLE_EQ(im.step, (4.0 + 6.0) / 7);
  // Durations: r0 = (2, 1.5), r1 = (1, 3); mean total 3.75, step maxima 2 + 3.
  EXPECT_DOUBLE_EQ(im.step_measured, 5.0 / 3.75);
}

TEST(StepReport, CriticalPathGoesThroughTheRecvPartner) {
  const Hand h = hand();
  const CriticalPath cp = make_step_report(h.e, h.s, h.tl).critical_path;
  // op 4 waited for the recv; the recv's transfer for the send, which waited for op 0.
  EXPECT_EQ(cp.ops, (std::vector<schedule::OpId>{0, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(cp.length_s, 8);
  EXPECT_DOUBLE_EQ(cp.compute_s, 5);        // op 0 [0,2] and op 4 [5,8]
  EXPECT_DOUBLE_EQ(cp.communication_s, 3);  // the recv from when the send was posted, [2,5]
  EXPECT_DOUBLE_EQ(cp.waiting_s, 0);
  ASSERT_EQ(cp.by_kind.size(), 3u);
  EXPECT_EQ(cp.by_kind[0].kind, OpKind::attn_fwd);
  EXPECT_DOUBLE_EQ(cp.by_kind[0].seconds, 5);
  EXPECT_EQ(cp.by_kind[0].ops, 2);
  EXPECT_EQ(cp.by_kind[1].kind, OpKind::recv);
  EXPECT_DOUBLE_EQ(cp.by_kind[1].seconds, 3);
  EXPECT_EQ(cp.by_kind[2].kind, OpKind::send);
  EXPECT_DOUBLE_EQ(cp.by_kind[2].seconds, 0);
  EXPECT_EQ(cp.by_kind[2].ops, 1);
}

TEST(StepReport, CriticalPathCountsALateStartAsWaiting) {
  Hand h = hand();
  h.tl.events[4].start_s = 6;  // op 4 starts 1 s after the recv ended
  h.tl.events[4].end_s = 9;
  const CriticalPath cp = make_step_report(h.e, h.s, h.tl).critical_path;
  EXPECT_EQ(cp.ops, (std::vector<schedule::OpId>{0, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(cp.length_s, 9);
  EXPECT_DOUBLE_EQ(cp.compute_s, 5);
  EXPECT_DOUBLE_EQ(cp.communication_s, 3);
  EXPECT_DOUBLE_EQ(cp.waiting_s, 1);
}

TEST(StepReport, CriticalPathFollowsTheStreamAndACollectiveMember) {
  // r0: op 0 gemm [0,1], op 1 gemm [1,2] (stream order); op 2 all_reduce [2,4] after op 1.
  // r1: op 3 gemm [0,3]; op 4 all_reduce [3,4] after op 3. The call starts once r1 posts it,
  // at 3, so the path runs op 3 -> op 4 (via) -> op 2, and not through r0's gemms.
  Hand h = hand();
  h.s.ops.clear();
  h.tl.events.clear();
  h.s.groups.push_back({0, {0, 1}, "g"});
  auto add = [&](int rank, int stream, OpKind kind, std::vector<int64_t> deps, double start, double end) {
    schedule::Op op;
    op.id = int64_t(h.s.ops.size());
    op.rank = rank;
    op.stream = stream;
    op.kind = kind;
    h.s.set_desc(op, {1.0, 0, 0, 0});
    op.deps = std::move(deps);
    if (kind == OpKind::all_reduce) op.group = 0;
    h.s.ops.push_back(op);
    h.tl.events.push_back(event(op, start, end));
  };
  add(0, 0, OpKind::gemm, {}, 0, 1);
  add(0, 0, OpKind::gemm, {}, 1, 2);
  add(0, 1, OpKind::all_reduce, {1}, 2, 4);
  add(1, 0, OpKind::gemm, {}, 0, 3);
  add(1, 1, OpKind::all_reduce, {3}, 3, 4);
  h.tl.edges = engine::timeline_edges(h.s, schedule::RunPlan(h.s));
  const CriticalPath cp = make_step_report(h.e, h.s, h.tl).critical_path;
  EXPECT_EQ(cp.ops, (std::vector<schedule::OpId>{3, 4, 2}));
  EXPECT_DOUBLE_EQ(cp.length_s, 4);
  EXPECT_DOUBLE_EQ(cp.compute_s, 3);
  EXPECT_DOUBLE_EQ(cp.communication_s, 1);

  // Without the all-reduce, op 1's stream predecessor is on the path.
  h.s.ops.resize(2);
  h.tl.events.resize(2);
  h.tl.edges = engine::timeline_edges(h.s, schedule::RunPlan(h.s));
  EXPECT_EQ(make_step_report(h.e, h.s, h.tl).critical_path.ops, (std::vector<schedule::OpId>{0, 1}));
}

TEST(StepReport, JsonHasTheKeysScriptsReadAndTextCondensesManyRanks) {
  const Hand h = hand();
  StepReport r = make_step_report(h.e, h.s, h.tl);
  const auto j = to_json(r);
  EXPECT_DOUBLE_EQ(j.at("step_time_s").get<double>(), 8);
  EXPECT_DOUBLE_EQ(j.at("tokens_per_s").get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(j.at("mfu").get<double>(), 140.0 / 1600);
  EXPECT_DOUBLE_EQ(j.at("hfu").get<double>(), 896.0 / 1600);
  EXPECT_DOUBLE_EQ(j.at("dense_equivalent_speedup").get<double>(), 220.0 / 140);
  EXPECT_DOUBLE_EQ(j.at("flops").at("model").get<double>(), 140);
  EXPECT_DOUBLE_EQ(j.at("flops").at("dense_causal_model").get<double>(), 220);
  EXPECT_DOUBLE_EQ(j.at("flops").at("executed").get<double>(), 896);
  EXPECT_EQ(j.at("breakdown").at("per_rank").size(), 2u);
  EXPECT_DOUBLE_EQ(j.at("breakdown").at("mean").at("idle_s").get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j.at("breakdown").at("max").at("compute_s").get<double>(), 4);
  EXPECT_DOUBLE_EQ(j.at("imbalance").at("worker").get<double>(), 8.0 / 7);
  EXPECT_DOUBLE_EQ(j.at("imbalance").at("step").get<double>(), 10.0 / 7);
  EXPECT_TRUE(j.at("imbalance").contains("step_measured"));
  EXPECT_EQ(j.at("critical_path").at("ops").get<int>(), 4);
  EXPECT_EQ(j.at("critical_path").at("op_ids"), nlohmann::json({0, 2, 3, 4}));
  EXPECT_EQ(j.at("critical_path").at("by_kind")[0].at("kind"), "attn_fwd");

  const std::string small = to_text(r);
  EXPECT_NE(small.find("step time      8.000 s"), std::string::npos) << small;
  EXPECT_NE(small.find("MFU            8.8%"), std::string::npos) << small;
  EXPECT_NE(small.find("HFU            56.0%"), std::string::npos) << small;
  EXPECT_NE(small.find("1.57x"), std::string::npos) << small;

  // 12 ranks: rank 7 is the busiest, then 2, then 9; the rest are idle half the step.
  r.breakdown.per_rank.clear();
  for (int k = 0; k < 12; ++k) r.breakdown.per_rank.push_back({k, 4, 0, 4});
  r.breakdown.per_rank[7].idle_s = 1;
  r.breakdown.per_rank[2].idle_s = 2;
  r.breakdown.per_rank[9].idle_s = 3;
  const std::string big = to_text(r);
  const auto s1 = big.find("7 (slowest 1)"), s2 = big.find("2 (slowest 2)"), s3 = big.find("9 (slowest 3)");
  ASSERT_NE(s1, std::string::npos) << big;
  EXPECT_LT(s1, s2);
  EXPECT_LT(s2, s3);
  EXPECT_NE(big.find("\n  min "), std::string::npos) << big;
  EXPECT_EQ(big.find("\n  11 "), std::string::npos) << big;  // no row per rank
}

TEST(ModelFlops, HandCountOfATinyModel) {
  Experiment e;
  e.model.layers = 2;
  e.model.hidden = 4;
  e.model.heads = 2;
  e.model.kv_heads = 1;
  e.model.head_dim = 2;
  e.model.intermediate = 6;
  e.model.vocab = 10;
  e.workload.seq_len = 3;
  e.workload.batch = 2;
  // Matmul weights per layer: Q 4x4 = 16, K and V 2 x 4x2 = 16, O 4x4 = 16, MLP 3 x 4x6 = 72.
  EXPECT_EQ(cost::matmul_params_per_layer(e.model), 120);
  // T = 2 x 3 = 6 tokens. Layer matmuls 6 x 120 x 6 = 4320; LM head 6 x (10 x 4) x 6 = 1440.
  // Attention forward per layer: 6 causal pairs x 8 FLOPs (4 x head_dim) x 2 heads x 2 sequences = 192.
  e.scope = Scope::step;
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).dense, 2 * 4320 + 1440);
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).attention, 2 * 3 * 192);
  EXPECT_DOUBLE_EQ(cost::model_flops(e, 100).attention, 3 * 100);  // a mask with 100 forward FLOPs over the scope
  e.scope = Scope::layer;
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).dense, 4320);
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).attention, 3 * 192);
  e.scope = Scope::attention_fwd_bwd;
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).total(), 3 * 192);
  EXPECT_DOUBLE_EQ(cost::model_flops(e, 100).total(), 3 * 100);
  e.scope = Scope::attention_fwd;
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).total(), 192);
  EXPECT_DOUBLE_EQ(cost::model_flops(e, 100).total(), 100);
  e.parallel.dp = 2;  // twice the sequences
  EXPECT_DOUBLE_EQ(cost::dense_causal_model_flops(e).total(), 2 * 192);
}

struct Simulated {
  Experiment e;
  sparsity::SparsityModel m;
  schedule::Schedule s;
  traces::Timeline tl;
  StepReport r;
};

Simulated simulate(std::vector<std::string> overrides) {
  std::vector<std::string> all{"workload.seq_len=16k", "parallel.cp=8", "cluster=h200-1x8", "parallel.ring=ring"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  auto e = load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", all);
  auto m = pipeline::build_patterns(e);
  auto sim = pipeline::simulate_schedule(e, generate::generate_step(e, m, topology::Topology(e.cluster)),
                                         engine::EngineKind::analytic);
  return {std::move(e), std::move(m), std::move(sim.schedule), std::move(sim.timeline), std::move(sim.report)};
}

void expect_consistent(const Simulated& x) {
  const StepReport& r = x.r;
  ASSERT_GT(r.step_time_s, 0);
  ASSERT_EQ(r.breakdown.per_rank.size(), x.s.ranks.size());
  for (const RankTime& t : r.breakdown.per_rank) {
    EXPECT_NEAR(t.compute_s + t.exposed_comm_s + t.idle_s, r.step_time_s, 1e-9 * r.step_time_s) << "rank " << t.rank;
    EXPECT_GE(t.compute_s, 0);
    EXPECT_GE(t.exposed_comm_s, 0);
    EXPECT_GE(t.idle_s, 0);
  }
  // The analytic engine starts an op the moment what it waits for has ended,
  // so the walk reaches time 0 without gaps.
  const CriticalPath& cp = r.critical_path;
  EXPECT_NEAR(cp.length_s, r.step_time_s, 1e-9 * r.step_time_s);
  EXPECT_NEAR(cp.waiting_s, 0, 1e-9 * r.step_time_s);
  EXPECT_NEAR(cp.compute_s + cp.communication_s + cp.waiting_s, cp.length_s, 1e-9 * r.step_time_s);
  double by_kind = 0;
  for (const auto& sh : cp.by_kind) by_kind += sh.seconds;
  EXPECT_NEAR(by_kind, cp.compute_s + cp.communication_s, 1e-9 * r.step_time_s);
  // Sums of maxima are at least the maximum of sums.
  EXPECT_GE(r.imbalance.worker, 1);
  EXPECT_GE(r.imbalance.step, r.imbalance.worker - 1e-12);
  EXPECT_GE(r.imbalance.step_measured, 1 - 1e-12);
}

TEST(StepReport, InvariantsOnASparseLayerWithTheAnalyticEngine) {
  const Simulated x = simulate({"scope=layer", "model.layers=1"});
  expect_consistent(x);
  // The layer's attention non-zeros, counted on the pattern itself: the mask the model computes.
  const int64_t S = x.e.workload.seq_len;
  const sparsity::TokenSet all{{{0, S, 0, 1}}};
  double nnz = 0;
  for (int h = 0; h < x.e.model.heads; ++h)
    nnz += double(sparsity::count(x.m.head(0, h), all, all, {x.e.workload.block_q, x.e.workload.block_k}).nnz);
  const double sparsity = 1 - nnz / (double(x.e.model.heads) * double(S) * double(S + 1) / 2);
  ASSERT_GT(sparsity, 0.1);
  const auto mf = cost::model_flops(x.e, nnz * cost::attention_fwd_flops_per_nnz(x.e.model.head_dim));
  EXPECT_NEAR(x.r.model_flops, mf.total(), 1e-12 * mf.total());
  EXPECT_NEAR(x.r.dense_equivalent_speedup, x.r.dense_causal_model_flops / mf.total(), 1e-12);
  EXPECT_GT(x.r.dense_equivalent_speedup, 1);
  // Utilisations are fractions, and the kernels execute at least the model's FLOPs.
  EXPECT_GT(x.r.mfu, 0);
  EXPECT_GE(x.r.hfu, x.r.mfu);
  EXPECT_LT(x.r.hfu, 1);
  // The same ratios as `ringmaster imbalance` computes from the pattern, not from a schedule.
  const auto im = imbalance_report(x.e, x.m, topology::Topology(x.e.cluster), {x.e.parallel.partition});
  ASSERT_EQ(im.partitions.size(), 1u);
  EXPECT_NEAR(x.r.imbalance.worker, im.partitions[0].total.worker, 1e-12);
  EXPECT_NEAR(x.r.imbalance.step, im.partitions[0].total.step, 1e-12);
}

TEST(StepReport, DenseStepFlopsMatchTheModelFlopsFormula) {
  // No recomputation, dense causal: the schedule's matmuls are exactly the
  // model's; its attention forward is exactly a third of the model's attention.
  const Simulated x = simulate({"scope=step", "model.layers=2", "workload.pattern=dense-causal", "parallel.checkpoint=none"});
  expect_consistent(x);
  double gemm = 0, attn_fwd = 0;
  for (const auto& op : x.s.ops) {
    if (op.kind == OpKind::gemm) gemm += x.s.desc(op).flops;
    if (op.kind == OpKind::attn_fwd) attn_fwd += x.s.desc(op).flops;
  }
  const auto mf = cost::dense_causal_model_flops(x.e);
  EXPECT_NEAR(gemm, mf.dense, 1e-12 * mf.dense);
  EXPECT_NEAR(3 * attn_fwd, mf.attention, 1e-12 * mf.attention);
  EXPECT_NEAR(x.r.model_flops, mf.total(), 1e-12 * mf.total());
  EXPECT_GT(x.r.hfu, x.r.mfu);  // the backward's recomputed QK^T, elementwise work, diagonal tiles
  EXPECT_DOUBLE_EQ(x.r.tokens_per_s, 16384 / x.r.step_time_s);
}

// On a dense causal pattern the mask the model computes is the dense causal
// reference, whatever the generator, scope, batch or recomputation: MFU counts
// each pair once, so the speed-up is 1.
TEST(StepReport, DenseCausalHasNoDenseEquivalentSpeedupOnEveryGenerator) {
  const std::vector<std::vector<std::string>> variants{
      {"scope=attention_fwd"},
      {"scope=attention_fwd_bwd", "parallel.partition=zigzag"},
      {"scope=layer", "parallel.ring=double_ring", "parallel.window=2", "parallel.checkpoint=full"},
      {"scope=attention_fwd_bwd", "parallel.ring=hierarchical", "parallel.partition=stripe"},
      {"scope=layer", "parallel.cp=1", "parallel.hp=8", "workload.batch=2"},
      {"scope=step", "model.layers=2", "parallel.dp=2", "parallel.cp=4", "parallel.checkpoint=selective"}};
  for (const auto& v : variants) {
    std::vector<std::string> o{"workload.pattern=dense-causal"};
    o.insert(o.end(), v.begin(), v.end());
    const Simulated x = simulate(o);
    SCOPED_TRACE(x.s.generator + " " + to_string(x.e.scope));
    EXPECT_NEAR(x.r.model_flops, x.r.dense_causal_model_flops, 1e-12 * x.r.model_flops);
    EXPECT_NEAR(x.r.dense_equivalent_speedup, 1, 1e-12);
    EXPECT_GE(x.r.hfu, x.r.mfu);
    EXPECT_LT(x.r.hfu, 1);
  }
}

TEST(StepReport, AttentionForwardHfuCountsTheWholeTilesOfTheMask) {
  // Contiguous 2K-token shards are whole tiles, so the ranks together visit the
  // tiles of the whole causal mask: HFU / MFU = tile entries / non-zeros.
  const Simulated x = simulate({"scope=attention_fwd", "workload.pattern=dense-causal", "parallel.partition=contiguous"});
  expect_consistent(x);
  const int64_t S = x.e.workload.seq_len;
  const sparsity::TokenSet all{{{0, S, 0, 1}}};
  const auto whole = sparsity::count(x.m.head(0, 0), all, all, {x.e.workload.block_q, x.e.workload.block_k});
  const double entries = double(whole.blocks) * double(x.e.workload.block_q * x.e.workload.block_k);
  EXPECT_NEAR(x.r.hfu / x.r.mfu, entries / double(whole.nnz), 1e-12);
  EXPECT_GT(x.r.hfu, x.r.mfu);
}

}  // namespace
}  // namespace rm::report
