// Tensor parallelism (parallel.tp, Megatron with sequence parallelism) in the
// generators, the placement and the op count: against the tp = 1 Schedule of the
// same (dp, hp, cp) work, every FLOP and every attention byte is still executed
// exactly once over all ranks, each rank's GEMMs are 1/tp of them, the ring's K/V
// messages 1/tp; the tensor group's collectives are the hand-computed Megatron-SP
// ones; gradients are reduced over the replicas of each tensor shard only; both
// engines run it; bad degrees are refused naming parallel.tp.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/engine.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/schedule/validate.hpp"
#include "sim/topology/topology.hpp"

namespace rm::generate {
namespace {

using schedule::OpKind;
using schedule::Phase;
using ::testing::HasSubstr;

// Qwen2.5-3B (16 heads, 2 KV heads, hidden 2048, intermediate 11008, vocab 151936)
// on 2 layers of 16K tokens, a100-40g-4x8-hdr (8 GPUs per node).
Experiment load(std::vector<std::string> sets) {
  std::vector<std::string> all{"workload.seq_len=16384", "model.layers=2"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_experiment(ConfigStore{}, "", all);
}

std::vector<std::string> with(std::vector<std::string> sets, int tp) {
  sets.push_back("parallel.tp=" + std::to_string(tp));
  return sets;
}

// Per op kind: FLOPs, tiles and HBM bytes of the compute ops summed over every rank,
// outside the optimizer (AdamW updates the norms' weights on every tensor rank).
struct Work {
  std::map<OpKind, double> flops;
  std::map<OpKind, int64_t> blocks, bytes;
};
Work work_of(const schedule::Schedule& s) {
  Work w;
  for (const auto& op : s.ops)
    if (schedule::is_compute(op.kind) && op.phase != Phase::optimizer) {
      w.flops[op.kind] += s.desc(op).flops;
      w.blocks[op.kind] += s.desc(op).blocks;
      w.bytes[op.kind] += s.desc(op).bytes;
    }
  return w;
}

const std::vector<std::vector<std::string>> kLayouts = {
    {"parallel.cp=4", "parallel.ring=ring", "parallel.partition=zigzag", "workload.pattern=dense-causal"},
    {"parallel.cp=4", "parallel.ring=hierarchical", "parallel.partition=stripe"},  // dynamic top-p index building
    {"parallel.cp=2", "parallel.hp=2", "parallel.ring=double_ring", "parallel.window=2", "model=llama2-7b-gqa",
     "workload.pattern=sliding-window", "parallel.checkpoint=selective"},  // hp <= kv_heads/tp: no KV copies
    {"parallel.dp=2", "parallel.cp=2", "workload.pattern=sliding-window", "parallel.checkpoint=none"},
};

TEST(TensorParallel, ExecutesTheSameWorkAsTp1OverAllRanks) {
  pipeline::Session session;
  for (const char* scope : {"scope=layer", "scope=step"})
    for (auto sets : kLayouts) {
      sets.push_back(scope);
      const Work one = work_of(session.schedule(load(sets)));
      const auto e = load(with(sets, 2));
      const auto s = session.schedule(e);
      EXPECT_EQ(int(s.ranks.size()), 2 * load(sets).parallel.world());
      EXPECT_EQ(s.generator.rfind("tp2-", 0), 0u) << s.generator;
      const Work two = work_of(s);
      for (const auto& [kind, f] : one.flops) {
        EXPECT_DOUBLE_EQ(two.flops.at(kind), f) << to_string(kind) << " " << ::testing::PrintToString(sets);
        EXPECT_EQ(two.blocks.at(kind), one.blocks.at(kind)) << to_string(kind);
        EXPECT_EQ(two.bytes.at(kind), one.bytes.at(kind)) << to_string(kind) << " " << ::testing::PrintToString(sets);
      }
      EXPECT_EQ(two.flops.size(), one.flops.size());
    }
}

// Every rank's GEMMs, with their (m, n, k): 1/tp of the columns or rows, all local tokens.
TEST(TensorParallel, EachRanksGemmsAreOneTpthOfTp1s) {
  pipeline::Session session;
  const std::vector<std::string> sets{"parallel.cp=4", "model=llama2-7b-gqa", "workload.pattern=dense-causal",
                                      "parallel.partition=zigzag", "parallel.ring=ring", "scope=step"};
  auto per_rank = [&](int tp) {
    const auto s = session.schedule(load(with(sets, tp)));
    std::map<int, double> flops;
    for (const auto& op : s.ops)
      if (op.kind == OpKind::gemm) flops[op.rank] += s.desc(op).flops;
    return flops;
  };
  const auto one = per_rank(1);
  for (int tp : {2, 4, 8}) {
    const auto many = per_rank(tp);
    ASSERT_EQ(many.size(), one.size() * size_t(tp));
    for (const auto& [rank, f] : many) EXPECT_DOUBLE_EQ(f * tp, one.begin()->second) << "tp " << tp << " rank " << rank;
  }
  // The QKV projection of layer 0's forward on rank 0 at tp = 4: m = 16384/4 local tokens,
  // n = (32 + 2*8) heads * 128 / 4, k = 4096.
  const auto s = session.schedule(load(with(sets, 4)));
  const schedule::Op* qkv = nullptr;
  for (const auto& op : s.ops)
    if (op.rank == 0 && op.kind == OpKind::gemm && op.layer == 0 && op.phase == Phase::forward) {
      qkv = &op;
      break;
    }
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(*s.gemm_of(*qkv), (schedule::Gemm{4096, 1536, 4096}));
  EXPECT_DOUBLE_EQ(s.desc(*qkv).flops, 2.0 * 4096 * 1536 * 4096);
}

// Megatron-SP per layer and pass on every rank: an all-gather before and a reduce-scatter
// after the attention block and the MLP block (backward: the mirror, and the inputs of
// the column-parallel GEMMs gathered again for their weight gradients), each of all
// b*s/(cp*hp) local tokens x hidden in bf16; plus, in a step, the embedding's
// reduce-scatter, the final norm's all-gather and their backward.
TEST(TensorParallel, CollectivesAreMegatronSequenceParallels) {
  pipeline::Session session;
  const auto e = load({"parallel.cp=4", "parallel.tp=2", "workload.batch=2", "workload.pattern=dense-causal",
                       "parallel.partition=zigzag", "parallel.ring=ring", "scope=step", "parallel.checkpoint=full"});
  const auto s = session.schedule(e);
  const int64_t bytes = 2 * 16384 / 4 * 2048 * 2;  // batch * S/cp * hidden * bf16 = 33,554,432
  std::map<std::tuple<int, int, int, OpKind>, int> count;  // (rank, phase, layer, kind)
  for (const auto& op : s.ops) {
    const auto* st = s.find_stream(op.rank, op.stream);
    ASSERT_NE(st, nullptr);
    if (st->name != "tp") continue;
    ASSERT_TRUE(op.kind == OpKind::all_gather || op.kind == OpKind::reduce_scatter) << describe(s, op.id);
    EXPECT_EQ(s.desc(op).bytes, bytes) << describe(s, op.id);
    const auto& g = s.groups[size_t(op.group)].ranks;
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g[1], g[0] + 1) << "a tensor group is consecutive GPUs";
    EXPECT_EQ(st->kind, schedule::StreamKind::comm_intra);
    ++count[{op.rank, int(op.phase), op.layer, op.kind}];
  }
  for (int r = 0; r < e.parallel.world(); ++r) {
    for (int l = 0; l < 2; ++l)
      for (Phase p : {Phase::forward, Phase::recompute, Phase::backward}) {
        // backward: the inputs of QKV and gate+up gathered again for their weight gradients
        EXPECT_EQ((count[{r, int(p), l, OpKind::all_gather}]), p == Phase::backward ? 4 : 2) << r << " " << l << " " << to_string(p);
        EXPECT_EQ((count[{r, int(p), l, OpKind::reduce_scatter}]), 2) << r << " " << l << " " << to_string(p);
      }
    for (Phase p : {Phase::forward, Phase::backward}) {
      EXPECT_EQ((count[{r, int(p), -1, OpKind::all_gather}]), 1);
      EXPECT_EQ((count[{r, int(p), -1, OpKind::reduce_scatter}]), 1);
    }
  }
  EXPECT_EQ(count.size(), size_t(e.parallel.world()) * (2 * 3 * 2 + 2 * 2));
}

// Each tensor rank runs the ring over its own heads: cp rings per tensor rank, each
// K/V (and dK/dV) message 1/tp of tp = 1's.
TEST(TensorParallel, RingMessagesAreOneTpth) {
  pipeline::Session session;
  const std::vector<std::string> sets{"parallel.cp=4", "model=llama2-7b", "workload.pattern=dense-causal",
                                      "parallel.partition=zigzag", "parallel.ring=ring", "scope=attention_fwd_bwd"};
  auto sends = [&](int tp) {
    std::map<int64_t, int> by_bytes;
    const auto s = session.schedule(load(with(sets, tp)));
    for (const auto& op : s.ops)
      if (op.kind == OpKind::send) ++by_bytes[s.desc(op).bytes];
    return by_bytes;
  };
  const auto one = sends(1), four = sends(4);
  ASSERT_EQ(one.size(), four.size());
  for (auto a = one.begin(), b = four.begin(); a != one.end(); ++a, ++b) {
    EXPECT_EQ(b->first * 4, a->first);
    EXPECT_EQ(b->second, 4 * a->second);
  }
  // The forward K/V: 2 (K, V) x 4096 tokens x 32/4 KV heads x 128 x bf16.
  EXPECT_EQ(four.count(int64_t(2) * 4096 * 8 * 128 * 2), 1u);
}

// ZeRO shards and gradients are reduced over the ranks holding the same tensor shard
// (dp*hp*cp of them), with the shard's parameters: Qwen2.5-3B's layer holds
// 77,070,336 projection weights (split over tp) and 4,096 norm weights (whole).
TEST(TensorParallel, GradientsAreReducedOverEachShardsReplicas) {
  pipeline::Session session;
  const auto e = load({"parallel.dp=2", "parallel.cp=2", "parallel.tp=2", "parallel.zero_stage=1",
                       "workload.pattern=dense-causal", "parallel.partition=zigzag", "scope=step"});
  EXPECT_EQ(tp_layer_params(e.model, 2), 77'070'336 / 2 + 4'096);
  EXPECT_EQ(tp_layer_params(e.model, 1), e.model.layer_params());
  const auto s = session.schedule(e);
  int reductions = 0;
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::reduce_scatter || op.phase != Phase::backward || op.layer < 0) continue;
    const auto* st = s.find_stream(op.rank, op.stream);
    if (st->name != "dp") continue;
    ++reductions;
    EXPECT_EQ(s.desc(op).bytes, (77'070'336 / 2 + 4'096) * 2);
    std::set<int> t_of;
    for (int g : s.groups[size_t(op.group)].ranks) t_of.insert(g % 2);  // tensor rank = gpu mod tp
    EXPECT_EQ(s.groups[size_t(op.group)].ranks.size(), 4u);
    EXPECT_EQ(t_of.size(), 1u);
  }
  EXPECT_EQ(reductions, 2 * 8);  // two layers on each of the 8 ranks
}

TEST(TensorParallel, PlacesTensorRanksInnermostInsideANode) {
  for (const char* placement : {"head_first", "context_first"}) {
    const auto e = load({"parallel.dp=2", "parallel.hp=2", "parallel.cp=2", "parallel.tp=4",
                         std::string("parallel.placement=") + placement, "workload.pattern=dense-causal",
                         "parallel.partition=zigzag", "model=llama2-7b"});
    const placement::DeviceMap map(e.parallel);
    std::set<int> seen;
    for (int d = 0; d < 2; ++d)
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 2; ++c) {
          const auto g = map.tensor_group(d, h, c);
          for (int t = 0; t < 4; ++t) {
            EXPECT_EQ(g[size_t(t)], g[0] + t);
            EXPECT_EQ(g[size_t(t)] / 8, g[0] / 8) << "same node";
            seen.insert(g[size_t(t)]);
          }
          EXPECT_EQ(g[0] % 4, 0);
        }
    EXPECT_EQ(seen.size(), 32u);
    EXPECT_EQ(*seen.rbegin(), 31);
  }
  // Heads: tensor rank t owns the t-th quarter, head rank h half of it.
  const auto e = load({"parallel.hp=2", "parallel.cp=1", "parallel.tp=4", "model=llama2-7b-gqa"});
  const auto s = placement::head_shard(e.model, e.parallel, 1, 2);
  EXPECT_EQ(s.first_head, 2 * 8 + 4);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.first_kv_head, 5);
  EXPECT_EQ(s.kv_heads, 1);
}

// count_step_ops (the memory estimate) stays exact with tp > 1.
TEST(TensorParallel, OpCountIsTheGenerators) {
  pipeline::Session session;
  int checked = 0;
  for (const char* scope : {"scope=attention_fwd", "scope=attention_fwd_bwd", "scope=layer", "scope=step"})
    for (const auto& sets : kLayouts)
      for (int tp : {2}) {
        auto all = with(sets, tp);
        all.push_back(scope);
        for (const char* zero : {"parallel.zero_stage=0", "parallel.zero_stage=3"}) {
          all.push_back(zero);
          const auto e = load(all);
          const auto s = session.schedule(e);
          EXPECT_EQ(count_step_ops(e), int64_t(s.ops.size())) << ::testing::PrintToString(all);
          EXPECT_NO_THROW(schedule::validate(s, "tp test"));
          all.pop_back();
          ++checked;
        }
      }
  // tp = 4 and 8 on a model with 8 KV heads, and tp alone (no gradient collectives).
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"parallel.tp=4", "parallel.cp=2", "model=llama2-7b-gqa", "scope=step"},
           {"parallel.tp=8", "parallel.dp=2", "parallel.cp=1", "model=llama2-7b-gqa", "scope=step", "parallel.zero_stage=3"},
           {"parallel.tp=8", "parallel.cp=1", "model=llama2-7b-gqa", "scope=step", "workload.pattern=dense-causal"},
           {"parallel.tp=2", "parallel.cp=8", "parallel.ring=hierarchical", "parallel.partition=stripe", "scope=layer"}}) {
    const auto e = load(sets);
    const auto s = session.schedule(e);
    EXPECT_EQ(count_step_ops(e), int64_t(s.ops.size())) << ::testing::PrintToString(sets);
    EXPECT_NO_THROW(schedule::validate(s, "tp test"));
    ++checked;
  }
  EXPECT_EQ(checked, 4 * 4 * 2 + 4);
}

// A deterministic spread over the generator's choices (xorshift; no clock).
struct Pick {
  uint64_t s;
  int operator()(int n) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return int(s % uint64_t(n));
  }
};

// Many random layouts with tp = 2 or 4 on a model with 8 KV heads: the Schedule validates,
// count_step_ops is its op count, and (where no KV head is copied, hp*tp <= KV heads) the
// work over all ranks is tp = 1's.
// (Each case builds in milliseconds: 2 layers of 16K tokens.)
TEST(TensorParallel, RandomLayoutsValidateCountAndConserveWork) {
  const char* rings[] = {"ring", "double_ring", "hierarchical"};
  const char* partitions[] = {"contiguous", "zigzag", "stripe", "balanced"};
  const char* scopes[] = {"attention_fwd", "attention_fwd_bwd", "layer", "step"};
  const char* checkpoints[] = {"none", "full", "selective"};
  const char* patterns[] = {"dense-causal", "topp-synthetic", "document-causal", "sliding-window"};
  const char* placements[] = {"head_first", "context_first"};
  const int dims[][3] = {{1, 1, 2}, {1, 1, 4}, {2, 1, 4}, {1, 2, 4}, {2, 2, 2}, {1, 1, 8}, {1, 4, 2}, {4, 1, 2}, {1, 2, 2}};
  Pick pick{0x2545f4914f6cdd1dull};
  pipeline::Session session;
  int checked = 0, conserved = 0;
  for (int i = 0; i < 60; ++i) {
    const auto& d = dims[pick(int(std::size(dims)))];
    const int tp = 2 << pick(2);
    const std::string ring = rings[pick(3)];
    std::vector<std::string> sets{"model=llama2-7b-gqa", "parallel.dp=" + std::to_string(d[0]),
                                  "parallel.hp=" + std::to_string(d[1]), "parallel.cp=" + std::to_string(d[2]),
                                  "parallel.ring=" + ring, std::string("parallel.partition=") + partitions[pick(4)],
                                  std::string("scope=") + scopes[pick(4)],
                                  std::string("parallel.checkpoint=") + checkpoints[pick(3)],
                                  "parallel.zero_stage=" + std::to_string(pick(4)),
                                  std::string("workload.pattern=") + patterns[pick(4)],
                                  std::string("parallel.placement=") + placements[pick(2)]};
    if (ring == "double_ring") sets.push_back("parallel.window=" + std::to_string(d[2] >= 4 ? 2 : 1));
    Experiment e;
    schedule::Schedule s;
    try {
      e = load(with(sets, tp));
      s = session.schedule(e);
    } catch (const ConfigError&) {  // more GPUs than the cluster's, or a layout the kinds refuse
      continue;
    }
    const std::string what = ::testing::PrintToString(with(sets, tp));
    ASSERT_EQ(count_step_ops(e), int64_t(s.ops.size())) << what;
    ASSERT_NO_THROW(schedule::validate(s, what));
    ++checked;
    if (d[1] * tp > e.model.kv_heads) continue;
    const Work one = work_of(session.schedule(load(sets))), many = work_of(s);
    // A hierarchical ring of tp > 1 spans tp times the nodes (a context group takes every
    // tp-th GPU), so its rounds, hence its outer dK|dV additions, differ: FLOPs only.
    for (const auto& [kind, f] : one.flops) {
      EXPECT_DOUBLE_EQ(many.flops.at(kind), f) << to_string(kind) << " " << what;
      if (ring != "hierarchical") {
        EXPECT_EQ(many.bytes.at(kind), one.bytes.at(kind)) << to_string(kind) << " " << what;
      }
    }
    ++conserved;
  }
  EXPECT_GE(checked, 30);
  EXPECT_GE(conserved, 15);
}

// One node, one flow per link at a time: the engines agree on a tp = 2 layer.
TEST(TensorParallel, BothEnginesRunItAndAgree) {
  const auto e = load({"cluster=h200-1x8", "parallel.tp=2", "parallel.cp=4", "parallel.ring=ring",
                       "parallel.partition=zigzag", "workload.pattern=dense-causal", "kernel.attention=fa2",
                       "scope=layer", "parallel.checkpoint=none"});
  pipeline::Session session;
  const auto s = session.schedule(e);
  const topology::Topology topo(e.cluster);
  const auto m = cost::CostModel::for_experiment(e);
  const double a = engine::simulate(s, topo, m, engine::EngineKind::analytic).makespan_s();
  const double g = engine::simulate(s, topo, m, engine::EngineKind::simgrid).makespan_s();
  EXPECT_GT(a, 0);
  EXPECT_NEAR(a, g, 0.01 * g) << "analytic " << a << " s, simgrid " << g << " s";
}

TEST(TensorParallel, BadDegreesNameParallelTp) {
  auto error_of = [](std::vector<std::string> sets) {
    try {
      load(std::move(sets));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Qwen2.5-3B has 2 KV heads; llama2-7b 32 heads.
  EXPECT_THAT(error_of({"parallel.tp=4", "parallel.cp=1"}), HasSubstr("$.parallel.tp: expected a divisor of the model's 2 KV heads"));
  EXPECT_THAT(error_of({"parallel.tp=3", "parallel.cp=1", "model=llama2-7b"}), HasSubstr("$.parallel.tp: a tensor-parallel group stays"));
  EXPECT_THAT(error_of({"parallel.tp=8", "parallel.hp=8", "parallel.cp=1", "model=llama2-7b", "cluster.nodes=8"}),
              HasSubstr("$.parallel.tp: tp*hp must divide the model's 32 heads, got tp*hp = 8*8"));
  EXPECT_THAT(error_of({"parallel.tp=2", "parallel.cp=32"}),
              HasSubstr("$.parallel.tp: dp*tp*hp*cp = 1*2*1*32 = 64 exceeds the 32 GPUs"));
  EXPECT_THAT(error_of({"parallel.tp=16", "model=llama2-7b", "parallel.cp=1"}), HasSubstr("$.parallel.tp"));
  EXPECT_THAT(error_of({"parallel.tp=2", "parallel.cp=4", "workload.seq_len=8196", "parallel.partition=contiguous",
                        "workload.pattern=dense-causal"}),
              HasSubstr("$.parallel.tp: sequence parallelism"));
  EXPECT_THAT(error_of({"parallel.tp=0", "parallel.cp=1"}), HasSubstr("$.parallel.tp"));
  EXPECT_EQ(error_of({"parallel.tp=2", "parallel.cp=16"}), "no error");
}

}  // namespace
}  // namespace rm::generate
