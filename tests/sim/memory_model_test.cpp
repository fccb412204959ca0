// The memory model (sim/memory/memory_model.hpp): every term of a small model
// against figures worked out by hand below; invariants over many random
// configurations (ZeRO stages never add memory, more checkpointing never more
// activation memory, tp and dp divide what they shard, the terms add up to the
// peak); and, as an oracle, the tensors it is built from against the buffers a
// generated Schedule declares (ring, hierarchical, double ring, Ulysses, 2D),
// with the differences docs/memory.md states.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/generate/layer_costs.hpp"
#include "sim/memory/memory_model.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace rm::memory {
namespace {

// A small model: 2 layers, hidden 64, 4 heads of 16, 2 KV heads, SwiGLU 128, vocab 1000.
const char* kSmallModel =
    R"(model={"name":"small","layers":2,"hidden":64,"heads":4,"kv_heads":2,"head_dim":16,"intermediate":128,)"
    R"("vocab":1000,"tied_embeddings":false})";

Experiment load(std::vector<std::string> sets) {
  std::vector<std::string> all{kSmallModel, "workload.seq_len=1024", "workload.pattern=dense-causal",
                               "kernel.attention=fa2", "parallel.partition=contiguous", "parallel.ring=ring",
                               "parallel.cp=4", "parallel.checkpoint=full", "parallel.zero_stage=1",
                               "parallel.loss_chunk_tokens=0", "cluster.gpu.context_GB=0",
                               "cluster.gpu.fragmentation=0"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_experiment(ConfigStore{}, "", all);
}

int64_t sum_terms(const MemoryReport& r) {
  int64_t s = 0;
  for (const Term& t : r.terms) s += t.bytes;
  return s;
}

TEST(MemoryModel, SmallModelByHand) {
  const Experiment e = load({});
  const Tensors t = tensors(e);
  // Parameters: a layer has q 64*4*16 = 4096, k|v 2*64*2*16 = 4096, o 4096, MLP 3*64*128 = 24576,
  // norms 2*64 = 128: 36992. Embedding + LM head (untied) 2*1000*64 = 128000, final norm 64.
  EXPECT_EQ(t.layer_params, 36992);
  EXPECT_EQ(t.embed_params, 128064);
  EXPECT_EQ(t.params, 2 * 36992 + 128064);  // 202048
  EXPECT_EQ(t.zero_group, 4);               // dp*hp*cp = 1*1*4
  // Attention, ring layout: T = 1024/4 = 256 tokens, 4 heads, 2 KV heads, D = 16.
  EXPECT_EQ(t.q, 256 * 4 * 16 * 2);        // 32768
  EXPECT_EQ(t.kv, 2 * 256 * 2 * 16 * 2);   // 32768
  EXPECT_EQ(t.dkv, 2 * 256 * 2 * 16 * 4);  // 65536, fp32
  EXPECT_EQ(t.lse, 256 * 4 * 4);           // 4096
  // Dense layout: N = 256 tokens; x 256*64*2; xn1, h, hn + gu (2*128) + act (128); dx, dhn, dh, dxn1 + dgu + dact.
  EXPECT_EQ(t.x, 32768);
  EXPECT_EQ(t.dense_rest, 256 * (3 * 64 + 3 * 128) * 2);  // 294912
  EXPECT_EQ(t.dense_grads, 256 * (4 * 64 + 3 * 128) * 2);  // 327680
  EXPECT_EQ(t.exchanges, 0);  // hp = 1, contiguous: no all-to-all
  EXPECT_EQ(t.o_seq, 0);
  EXPECT_EQ(t.index, 0);      // dense pattern
  // A flat ring of 4: one round of 4 steps. K|V slots 2 (double buffer); dK|dV 2 inner + 2 step partials.
  EXPECT_EQ(t.outer, 1);
  EXPECT_EQ(t.inner, 4);
  EXPECT_EQ(t.kv_slots, 2 * 32768);
  EXPECT_EQ(t.dkv_slots, 4 * 65536);
  // fa2 returns each step's O and LSE: partial O + LSE, fp32 O (2q) + fp32 LSE.
  EXPECT_EQ(t.fwd_partials, 32768 + 4096 + 2 * 32768 + 4096);  // 106496
  // dO q, dQ fp32 accumulator 2q + bf16 partial q, the owner's dK|dV.
  EXPECT_EQ(t.bwd_partials, 32768 + 3 * 32768 + 65536);  // 196608
  // Loss, unchunked: xf + dxf (2x) + 256 tokens x 1000 x (2 + 4 + 2).
  EXPECT_EQ(t.loss, 2 * 32768 + 256 * 1000 * 8);  // 2113536

  const MemoryReport r = estimate_memory(e);
  EXPECT_EQ(r.term(kWeights), 2 * 202048);  // 404096, bf16, ZeRO-1 keeps them whole
  EXPECT_EQ(r.term(kGradients), 2 * 202048);
  EXPECT_EQ(r.term(kOptimizer), 12 * 50512);  // shard = ceil(202048/4) = 50512 x 12 = 606144
  EXPECT_EQ(r.term(kCheckpoints), 3 * 32768);  // full: every layer's input, and the last layer's output
  // Layer moment: layer 404096+404096+606144+98304 + (327680+294912+102400) + 524288 = 2761920;
  // attention = max(65536 + 106496, 65536 + 262144 + 196608) = 524288.
  // Loss moment: 404096+404096+606144+98304 + 2113536 = 3626176: the peak.
  EXPECT_EQ(r.layer_backward_bytes, 2761920);
  EXPECT_EQ(r.loss_bytes, 3626176);
  EXPECT_EQ(r.peak_at, Moment::loss);
  EXPECT_EQ(r.peak_bytes, 3626176);
  EXPECT_EQ(r.term(kLoss), 2113536);
  EXPECT_EQ(r.term(kLayer), 0);  // not live at the loss
  EXPECT_EQ(sum_terms(r), r.peak_bytes);
  EXPECT_EQ(r.capacity_bytes, int64_t(40e9));
  EXPECT_FALSE(r.oom);

  // Chunked loss (64 tokens): 65536 + 64*1000*8 = 577536; the layer's backward is the peak now.
  const MemoryReport c = estimate_memory(load({"parallel.loss_chunk_tokens=64"}));
  EXPECT_EQ(c.loss_bytes, 3626176 - 2113536 + 577536);
  EXPECT_EQ(c.peak_at, Moment::layer_backward);
  EXPECT_EQ(c.peak_bytes, 2761920);
  EXPECT_EQ(c.term(kLayer), 327680 + 294912 + 102400);
  EXPECT_EQ(c.term(kAttention), 524288);
  EXPECT_EQ(c.term(kLoss), 0);
}

TEST(MemoryModel, CheckpointPoliciesByHand) {
  // none: a layer keeps x + the rest + Q, K|V, O, LSE: 32768 + 294912 + 102400 = 430080;
  // its backward adds only the temporaries (327680).
  const MemoryReport n = estimate_memory(load({"parallel.checkpoint=none", "parallel.loss_chunk_tokens=64"}));
  EXPECT_EQ(n.term(kCheckpoints), 2 * 430080 + 32768);
  EXPECT_EQ(n.term(kLayer), 327680);
  // selective (checkpoint++): x + O + LSE = 32768 + 32768 + 4096 = 69632 kept; the backward rebuilds
  // the rest (294912) and gets Q, K|V again (65536), beside its temporaries.
  const MemoryReport s = estimate_memory(load({"parallel.checkpoint=selective", "parallel.loss_chunk_tokens=64"}));
  EXPECT_EQ(s.term(kCheckpoints), 2 * 69632 + 32768);
  EXPECT_EQ(s.term(kLayer), 327680 + 294912 + 65536);
}

TEST(MemoryModel, ZeroStagesByHand) {
  // 8 layers over cp = 8: P = 8*36992 + 128064 = 424000, shard = 424000/8 = 53000. A one-token loss
  // chunk keeps the peak at the layer's backward.
  auto at = [](int stage) {
    return estimate_memory(load({"model.layers=8", "parallel.cp=8", "parallel.loss_chunk_tokens=1",
                                 "parallel.zero_stage=" + std::to_string(stage)}));
  };
  const MemoryReport z0 = at(0), z1 = at(1), z2 = at(2), z3 = at(3);
  for (const MemoryReport* r : {&z0, &z1, &z2, &z3}) EXPECT_EQ(r->peak_at, Moment::layer_backward);
  EXPECT_EQ(z0.term(kOptimizer), 12 * 424000);
  EXPECT_EQ(z1.term(kOptimizer), 12 * 53000);
  EXPECT_EQ(z1.term(kGradients), 2 * 424000);
  // ZeRO-2: the gradient shard, the embedding's whole gradient (reduced at the end) and two layers' in flight.
  EXPECT_EQ(z2.term(kGradients), 2 * (53000 + 128064 + 2 * 36992));
  EXPECT_EQ(z2.term(kWeights), 2 * 424000);
  // ZeRO-3: the parameter shard + two gathered layers; at the loss, the gathered embedding / LM head instead.
  EXPECT_EQ(z3.term(kWeights), 2 * (53000 + 2 * 36992));
  EXPECT_EQ(z3.term(kOptimizer), 12 * 53000);
  // Never more than unsharded: over cp = 2, at the (unchunked) loss, shard 101024 + the gathered
  // embedding 128064 exceed the 202048 parameters.
  const MemoryReport capped = estimate_memory(load({"parallel.cp=2", "parallel.zero_stage=3"}));
  EXPECT_EQ(capped.peak_at, Moment::loss);
  EXPECT_EQ(capped.term(kWeights), 2 * 202048);
  // With one GPU nothing is sharded, whatever the stage.
  const MemoryReport one = estimate_memory(load({"parallel.cp=1", "parallel.zero_stage=3"}));
  EXPECT_EQ(one.term(kWeights), 2 * 202048);
  EXPECT_EQ(one.term(kOptimizer), 12 * 202048);
}

TEST(MemoryModel, AllowancesComeFromTheClusterAndOomCarriesTheFigure) {
  const MemoryReport r = estimate_memory(load({"cluster.gpu.context_GB=1.5", "cluster.gpu.fragmentation=0.25"}));
  // Loss moment tensors 3626176: fragmentation 906544, context 1.5e9.
  EXPECT_EQ(r.term(kFragmentation), 906544);
  EXPECT_EQ(r.term(kContext), 1500000000);
  EXPECT_EQ(r.peak_bytes, 3626176 + 906544 + 1500000000);
  EXPECT_EQ(sum_terms(r), r.peak_bytes);
  // A GPU too small: OOM, with the figure and the shortfall.
  const MemoryReport small = estimate_memory(load({"cluster.gpu.memory_GB=1", "cluster.gpu.context_GB=1"}));
  EXPECT_TRUE(small.oom);
  EXPECT_EQ(small.peak_bytes, 3626176 + 1000000000);
  EXPECT_EQ(small.shortfall_bytes(), 3626176);
  const nlohmann::json j = to_json(small);
  EXPECT_EQ(j["oom"], true);
  EXPECT_DOUBLE_EQ(j["peak_GB"].get<double>(), 1.003626176);
  EXPECT_DOUBLE_EQ(j["capacity_GB"].get<double>(), 1.0);
  EXPECT_EQ(j["peak_at"], "loss");
  EXPECT_EQ(j["terms"].size(), 10u);
  EXPECT_NE(to_text(small).find("OUT OF MEMORY by 0.00 GB, the largest term cuda_nccl_context 1.00 GB"),
            std::string::npos);
  EXPECT_NE(to_text(r).find(": fits (peak at the loss)"), std::string::npos);
}

TEST(MemoryModel, TheStepsMemoryWhateverTheScopeAndDeterministic) {
  const MemoryReport step = estimate_memory(load({}));
  EXPECT_EQ(step.scope_bytes, step.peak_bytes);
  for (const char* scope : {"attention_fwd", "attention_fwd_bwd", "layer"}) {
    const MemoryReport r = estimate_memory(load({std::string("scope=") + scope}));
    EXPECT_EQ(r.peak_bytes, step.peak_bytes) << scope;
    auto a = to_json(r), b = to_json(step);
    for (const char* k : {"scope", "scope_GB", "scope_oom"}) a.erase(k), b.erase(k);
    EXPECT_EQ(a, b) << scope;
    EXPECT_EQ(to_json(r), to_json(estimate_memory(load({std::string("scope=") + scope})))) << scope;
  }
}

TEST(MemoryModel, ANarrowScopeIsCheckedOnWhatItHoldsNotOnTheOptimizer) {
  // MTraining's experiment without recomputation (512K tokens on A100-40GB): the step is
  // out of memory, one attention call is not.
  auto at = [](const char* scope) {
    return estimate_memory(load_experiment(ConfigStore{}, "", {std::string("scope=") + scope, "parallel.checkpoint=none"}));
  };
  const MemoryReport fwd = at("attention_fwd"), fwd_bwd = at("attention_fwd_bwd"), layer = at("layer");
  EXPECT_TRUE(fwd.oom);
  EXPECT_FALSE(fwd.scope_oom);
  EXPECT_LT(fwd.scope_bytes, fwd_bwd.scope_bytes);  // the backward adds dK|dV and its partials
  EXPECT_LT(fwd_bwd.scope_bytes, layer.scope_bytes);  // a layer adds its weights and dense activations
  EXPECT_LT(layer.scope_bytes, fwd.peak_bytes - fwd.term(kOptimizer));  // never the optimizer or other layers
  const std::string text = to_text(fwd);
  EXPECT_NE(text.find("held by scope attention_fwd: fits"), std::string::npos) << text;
  EXPECT_NE(text.find("a whole step"), std::string::npos) << text;
  // A scope that does not fit says so on its own line.
  const MemoryReport tiny =
      estimate_memory(load_experiment(ConfigStore{}, "", {"scope=attention_fwd", "cluster.gpu.memory_GB=1"}));
  EXPECT_TRUE(tiny.scope_oom);
  EXPECT_NE(to_text(tiny).find("held by scope attention_fwd: OUT OF MEMORY by"), std::string::npos);
}

// A deterministic spread over the configurations (xorshift; no clock).
struct Pick {
  uint64_t s;
  int operator()(int n) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return int(s % uint64_t(n));
  }
};

std::vector<std::string> random_config(Pick& pick) {
  const int dims[][3] = {{1, 1, 4}, {2, 1, 4}, {1, 2, 4},  {2, 2, 2}, {1, 1, 8},
                         {4, 1, 8}, {1, 4, 8}, {1, 2, 16}, {1, 4, 1}};
  const char* rings[] = {"ring", "double_ring", "hierarchical"};
  const char* partitions[] = {"contiguous", "zigzag", "stripe"};
  const char* patterns[] = {"dense-causal", "topp-synthetic"};
  const auto& d = dims[pick(int(std::size(dims)))];
  const std::string ring = rings[pick(3)];
  std::vector<std::string> sets{
      "model=qwen2.5-3b",
      "model.layers=" + std::to_string(2 + 2 * pick(3)),
      "workload.seq_len=" + std::to_string(32768 << pick(3)),
      "kernel.attention=block_sparse", "parallel.dp=" + std::to_string(d[0]), "parallel.hp=" + std::to_string(d[1]),
      "parallel.cp=" + std::to_string(d[2]),
      "parallel.ring=" + ring,
      std::string("parallel.partition=") + partitions[pick(3)],
      std::string("workload.pattern=") + patterns[pick(2)],
      std::string("parallel.grad_comm_dtype=") + (pick(2) ? "fp32" : "bf16"),
      "parallel.loss_chunk_tokens=" + std::to_string(pick(2) * 1024), "workload.batch=" + std::to_string(1 + pick(2))};
  if (ring == "double_ring" && d[2] > 1) sets.push_back("parallel.window=2");
  return sets;
}

int64_t activations(const MemoryReport& r) {
  return r.term(kCheckpoints) + r.term(kLayer) + r.term(kAttention) + r.term(kAllToAll);
}

TEST(MemoryModel, InvariantsOverManyConfigurations) {
  Pick pick{0x9e3779b97f4a7c15ull};
  for (int i = 0; i < 200; ++i) {
    const std::vector<std::string> sets = random_config(pick);
    SCOPED_TRACE(::testing::PrintToString(sets));
    auto with = [&](std::vector<std::string> more) {
      std::vector<std::string> all = sets;
      all.insert(all.end(), more.begin(), more.end());
      return load(all);
    };
    // ZeRO: every stage needs no more than the one before, at both moments.
    int64_t loss = INT64_MAX, layer = INT64_MAX;
    for (int z = 0; z <= 3; ++z) {
      const MemoryReport r = estimate_memory(with({"parallel.zero_stage=" + std::to_string(z)}));
      EXPECT_LE(r.loss_bytes, loss);
      EXPECT_LE(r.layer_backward_bytes, layer);
      loss = r.loss_bytes, layer = r.layer_backward_bytes;
      EXPECT_EQ(sum_terms(r), r.peak_bytes);
      EXPECT_EQ(r.peak_bytes, std::max(r.loss_bytes, r.layer_backward_bytes));
      EXPECT_EQ(r.oom, r.peak_bytes > r.capacity_bytes);
    }
    // More checkpointing never more memory (none >= selective >= full), at each moment: the
    // rest of the two moments' terms is the same.
    const MemoryReport none = estimate_memory(with({"parallel.checkpoint=none"}));
    const MemoryReport sel = estimate_memory(with({"parallel.checkpoint=selective"}));
    const MemoryReport full = estimate_memory(with({"parallel.checkpoint=full"}));
    EXPECT_GE(none.loss_bytes, sel.loss_bytes);
    EXPECT_GE(sel.loss_bytes, full.loss_bytes);
    EXPECT_GE(none.layer_backward_bytes, sel.layer_backward_bytes);
    EXPECT_GE(sel.layer_backward_bytes, full.layer_backward_bytes);
    // dp: activations do not change; ZeRO-1's optimizer state shrinks with the group.
    const Experiment e = with({"parallel.zero_stage=1"});
    if (e.parallel.world() * 2 <= e.cluster.gpus()) {
      Experiment twice = e;
      twice.parallel.dp *= 2;
      const MemoryReport a = estimate_memory(e), b = estimate_memory(twice);
      EXPECT_EQ(activations(a), activations(b));
      EXPECT_EQ(a.term(kLoss), b.term(kLoss));
      EXPECT_NEAR(2.0 * double(b.term(kOptimizer)), double(a.term(kOptimizer)), 24.0);
      EXPECT_EQ(a.term(kWeights), b.term(kWeights));
    }
  }
}

TEST(MemoryModel, TensorParallelismDividesWhatItShards) {
  Pick pick{0x2545f4914f6cdd1dull};
  for (int i = 0; i < 60; ++i) {
    const std::vector<std::string> sets = random_config(pick);
    SCOPED_TRACE(::testing::PrintToString(sets));
    const Experiment e = load(sets);
    if (e.parallel.hp * 2 > e.model.kv_heads) continue;  // tp would replicate KV heads: not a clean halving
    Experiment t2 = e;
    t2.parallel.tp = 2;  // set after loading: tp = 2 may not fit the cluster, which this model ignores
    const Tensors a = tensors(e), b = tensors(t2);
    // Norm weights stay whole on every tensor rank (the generator's shards); the rest halves.
    const int64_t norms = e.model.layer_norm_params(), whole = e.model.layers * norms + e.model.hidden;
    EXPECT_EQ(b.layer_params, generate::tp_layer_params(e.model, 2));
    EXPECT_NEAR(2.0 * double(b.layer_params - norms), double(a.layer_params - norms), 2.0);
    EXPECT_NEAR(2.0 * double(b.params - whole), double(a.params - whole), 2.0 * e.model.hidden);  // vocab rounds up
    for (auto [one, two] : {std::pair{a.q, b.q}, {a.kv, b.kv},
                            {a.dkv, b.dkv}, {a.lse, b.lse}, {a.x, b.x}, {a.dense_rest, b.dense_rest},
                            {a.dense_grads, b.dense_grads}, {a.index, b.index}, {a.loss, b.loss}})
      EXPECT_NEAR(2.0 * double(two), double(one), 2.0);
    EXPECT_EQ(a.zero_group, b.zero_group);  // the ZeRO group is dp*hp*cp: tp ranks hold different shards
    const MemoryReport ra = estimate_memory(e), rb = estimate_memory(t2);
    for (std::string_view name : {kCheckpoints, kLayer, kAttention, kAllToAll, kLoss}) {
      // tp spreads a hierarchical ring's context group over tp times as many nodes:
      // another ring shape, other slot counts (docs/generators.md, "Tensor parallelism").
      if (name == kAttention && (a.outer != b.outer || a.inner != b.inner)) continue;
      EXPECT_NEAR(2.0 * double(rb.term(name)), double(ra.term(name)), 64.0) << name;
    }
    for (std::string_view name : {kWeights, kGradients, kOptimizer})  // all but the norm weights
      EXPECT_NEAR(2.0 * double(rb.term(name)) / double(ra.term(name)), 1.0, 1e-3) << name;
  }
}

// --- Against the Schedule --------------------------------------------------

// Bytes of rank 0's buffers whose name passes `keep` (each counted once,
// whatever its instances: the model holds one pass and one layer).
template <class Keep>
int64_t declared(const schedule::Schedule& s, Keep keep) {
  int64_t sum = 0;
  for (const schedule::Buffer& b : s.buffers)
    if (b.rank == 0 && keep(b)) sum += b.bytes();
  return sum;
}
int64_t named(const schedule::Schedule& s, const std::string& name) {
  return declared(s, [&](const schedule::Buffer& b) { return b.name == name; });
}
bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
// The number after `prefix` in a name like "dkv.step7", or -1.
int suffix_number(const std::string& name, const std::string& prefix) {
  if (!starts(name, prefix) || name.size() == prefix.size()) return -1;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  return std::stoi(name.substr(prefix.size()));
}

TEST(MemoryModel, TensorsAreTheBuffersAGeneratedScheduleDeclares) {
  struct Case {
    const char* what;
    std::vector<std::string> sets;
  };
  const std::vector<Case> cases{
      {"flat ring", {"parallel.cp=8"}},
      {"hierarchical",
       {"parallel.cp=16", "parallel.ring=hierarchical", "parallel.partition=stripe", "workload.seq_len=4096"}},
      {"double ring", {"parallel.cp=8", "parallel.ring=double_ring", "parallel.window=2", "parallel.hp=2",
                       "parallel.partition=zigzag"}},
      {"ulysses", {"parallel.cp=1", "parallel.hp=4"}},
      {"2D selective", {"parallel.cp=4", "parallel.hp=2", "parallel.ring=double_ring", "parallel.window=2",
                        "parallel.checkpoint=selective", "parallel.grad_comm_dtype=bf16"}},
      {"dynamic sparse", {"model=qwen2.5-3b", "model.layers=2", "workload.seq_len=16384",
                          "workload.pattern=topp-synthetic", "kernel.attention=block_sparse", "parallel.cp=4",
                          "parallel.partition=stripe", "parallel.checkpoint=none"}},
  };
  pipeline::Session session;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Experiment e = load(c.sets);
    const Tensors t = tensors(e);
    const schedule::Schedule s = session.schedule(e);
    EXPECT_EQ(t.q, named(s, "q"));
    EXPECT_EQ(t.kv, named(s, "kv"));
    EXPECT_EQ(t.dkv, named(s, "dkv"));
    EXPECT_EQ(t.lse, named(s, "lse"));
    EXPECT_EQ(t.x, named(s, "x0"));
    EXPECT_EQ(t.dense_rest, named(s, "xn1") + named(s, "h") + named(s, "hn") + named(s, "gu") + named(s, "act"));
    EXPECT_EQ(t.dense_grads, named(s, "dx") + named(s, "dact") + named(s, "dgu") + named(s, "dhn") + named(s, "dh") +
                                 named(s, "dxn1"));
    EXPECT_EQ(t.o_seq, named(s, "o.seq"));
    EXPECT_EQ(t.layer_params * 2, named(s, "weights"));
    EXPECT_EQ(t.embed_params * 2, named(s, "embed.weights"));
    // The loss unchunked: xf, dxf, the bf16 logits and their gradient, and the fp32 copy (twice the bf16 bytes).
    Experiment whole = e;
    whole.parallel.loss_chunk_tokens = 0;
    EXPECT_EQ(tensors(whole).loss,
              named(s, "xf") + named(s, "dxf") + named(s, "logits") + named(s, "dlogits") + 2 * named(s, "logits"));
    // K|V receive slots: every one the Schedule declares (one copy of a per-pass buffer).
    EXPECT_EQ(t.kv_slots,
              declared(s, [](const schedule::Buffer& b) { return b.role == schedule::BufferRole::kv_slot; }));
    // dK|dV: inner and outer sums as declared; of the per-step partials and round sums, the
    // two in flight (the Schedule keeps one per step and per round: docs/memory.md).
    const int64_t dkv_slots = declared(s, [](const schedule::Buffer& b) {
      if (b.role != schedule::BufferRole::dkv_slot) return false;
      const int step = suffix_number(b.name, "dkv.step"), round = suffix_number(b.name, "dkv.round");
      if (step >= 0) return step < 2;
      if (round >= 0) return round < 2;
      return true;
    });
    EXPECT_EQ(t.dkv_slots, dkv_slots);
    // The backward's all-to-all staging: the exchange buffers of dO, dQ, dK|dV (and, under
    // selective, of the Q, K|V it brings again).
    const int64_t staging = declared(s, [](const schedule::Buffer& b) {
      if (b.role != schedule::BufferRole::exchange) return false;
      for (const char* home : {"do.", "dq.", "dkv.", "q.bwd.", "kv.bwd."})
        if (starts(b.name, home)) return true;
      return false;
    });
    EXPECT_EQ(t.exchange, staging);
    // The built index: the block mask counted in bytes (the IR declares it int32), the vertical lists as declared.
    const int64_t mask = named(s, "index") / 4, bars = named(s, "index.bars");
    EXPECT_EQ(t.index, mask + bars);
  }
}

}  // namespace
}  // namespace rm::memory
