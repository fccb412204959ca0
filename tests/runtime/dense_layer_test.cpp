// runtime/dense_layer: the weight layout holds the model's layer parameters in
// the documented order; weights and dense inputs are pure, bf16-exact
// functions of their coordinates on streams of their own; the row kernels'
// backward passes agree with finite differences of their forwards; the
// outputs --check gathers survive packing; and one rank running a hand-built
// layer Schedule through CpuCompute (its tokens in a permuted local order,
// batch 2, dK|dV in fp32) passes check_layer against the reference, while a
// wrong weight size is refused naming the buffer.
#include "runtime/dense_layer.hpp"

#include <cmath>
#include <random>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "kernels/bf16.hpp"
#include "runtime/check.hpp"
#include "runtime/cpu_compute.hpp"
#include "runtime/inputs.hpp"
#include "runtime/seed.hpp"
#include "sim/config/config_store.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {
namespace {

Model small_model() {
  Model m;
  m.name = "t";
  m.layers = 2, m.hidden = 64, m.heads = 4, m.kv_heads = 2, m.head_dim = 16, m.intermediate = 96;
  return m;
}

TEST(WeightLayout, HoldsTheLayerParametersInOrder) {
  const Model m = small_model();
  const WeightLayout w(m);
  EXPECT_EQ(w.total, m.layer_params());
  EXPECT_EQ(w.norm1, 0);
  EXPECT_EQ(w.qkv, 64);
  EXPECT_EQ(w.o, w.qkv + 64 * (64 + 2 * 32));
  EXPECT_EQ(w.norm2, w.o + 64 * 64);
  EXPECT_EQ(w.gu, w.norm2 + 64);
  EXPECT_EQ(w.down, w.gu + 64 * 2 * 96);
  EXPECT_EQ(w.total, w.down + 96 * 64);
  EXPECT_EQ(w.fan_in(0), 0);
  EXPECT_EQ(w.fan_in(w.qkv), 64);
  EXPECT_EQ(w.fan_in(w.o), 64);  // q = heads x head_dim = 64
  EXPECT_EQ(w.fan_in(w.norm2 + 3), 0);
  EXPECT_EQ(w.fan_in(w.gu), 64);
  EXPECT_EQ(w.fan_in(w.down), 96);
  EXPECT_EQ(w.fan_in(w.total - 1), 96);
}

TEST(WeightValue, PureBf16ExactAndScaled) {
  const WeightLayout w(small_model());
  std::set<float> seen;
  for (int64_t i = 0; i < w.total; i += 7) {
    const float v = weight_value(w, 3, 1, i);
    EXPECT_EQ(v, weight_value(w, 3, 1, i));
    EXPECT_EQ(v, kernels::round_bf16(v));
    const int64_t fan = w.fan_in(i);
    if (fan == 0) {
      EXPECT_GE(v, 0.875f);
      EXPECT_LE(v, 1.125f);
    } else {
      EXPECT_LE(std::abs(v), 1.0f / std::sqrt(float(fan)) * 1.01f);
    }
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 100u);
  int differ_layer = 0, differ_seed = 0;
  for (int64_t i = w.qkv; i < w.qkv + 100; ++i) {
    differ_layer += weight_value(w, 3, 0, i) != weight_value(w, 3, 1, i);
    differ_seed += weight_value(w, 4, 1, i) != weight_value(w, 3, 1, i);
  }
  EXPECT_GT(differ_layer, 90);
  EXPECT_GT(differ_seed, 90);
}

TEST(DenseInput, OwnStreamsPureAndBf16Exact) {
  int same_as_attention = 0, x_equals_dy = 0;
  for (int64_t t = 0; t < 50; ++t)
    for (int64_t f = 0; f < 8; ++f) {
      const float x = dense_input_value(9, DenseInput::x, 1, t, f);
      EXPECT_EQ(x, dense_input_value(9, DenseInput::x, 1, t, f));
      EXPECT_EQ(x, kernels::round_bf16(x));
      EXPECT_GE(x, -1.f);
      EXPECT_LT(x, 1.f);
      same_as_attention += x == input_value(9, InputTensor::q, 1, t, f, 0);
      x_equals_dy += x == dense_input_value(9, DenseInput::dy, 1, t, f);
    }
  EXPECT_LT(same_as_attention, 10);
  EXPECT_LT(x_equals_dy, 10);
}

// Central differences (in fp64 on the fp32 kernels, step 1e-2: fp32 rounding
// dominates below) of L = sum(forward . g) against the backward.
TEST(RowKernels, BackwardsMatchFiniteDifferences) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t rows = 3, H = 16, I = 8;
  std::vector<float> x(size_t(rows * H)), w(static_cast<size_t>(H)), g(size_t(rows * H)), res(size_t(rows * H));
  for (auto* v : {&x, &g, &res})
    for (float& e : *v) e = u(rng);
  for (float& e : w) e = 1.f + u(rng) / 8;
  std::vector<float> dx(x.size()), y(x.size());
  rms_norm_backward(x, w, g, res, dx, H);
  auto loss = [&] {
    rms_norm(x, w, y, H);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += double(y[i]) * g[i];
    return l;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + 1e-2f;
    const double up = loss();
    x[i] = keep - 1e-2f;
    const double down = loss();
    x[i] = keep;
    EXPECT_NEAR(dx[i] - res[i], (up - down) / 2e-2, 2e-3) << i;
  }
  std::vector<float> gu(size_t(rows * 2 * I)), act(size_t(rows * I)), da(act.size()), dgu(gu.size());
  for (float& e : gu) e = 2 * u(rng);
  for (float& e : da) e = u(rng);
  swiglu_backward(gu, da, dgu, I);
  auto loss2 = [&] {
    swiglu(gu, act, I);
    double l = 0;
    for (size_t i = 0; i < act.size(); ++i) l += double(act[i]) * da[i];
    return l;
  };
  for (size_t i = 0; i < gu.size(); ++i) {
    const float keep = gu[i];
    gu[i] = keep + 1e-2f;
    const double up = loss2();
    gu[i] = keep - 1e-2f;
    const double down = loss2();
    gu[i] = keep;
    EXPECT_NEAR(dgu[i], (up - down) / 2e-2, 2e-3) << i;
  }
}

TEST(RowKernels, RmsNormHasUnitRms) {
  const int64_t H = 32;
  std::vector<float> x(size_t(2 * H)), w(size_t(H), 1.f), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3.f + (i >= size_t(H) ? 100.f : 0.f);
  rms_norm(x, w, y, H);
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(y[size_t(r * H + i)]) * y[size_t(r * H + i)];
    EXPECT_NEAR(std::sqrt(ss / H), 1.0, 1e-4);
  }
}

TEST(DenseOutputs, PackRoundTripAndTruncation) {
  DenseOutputs d;
  d.rank = 3, d.layer = 1;
  d.tokens = {5, 1, 9};
  d.y = {1.5f, -2.f};
  d.dx = {0.25f};
  d.wgrad = {1, 2, 3, 4};
  const std::string bytes = pack(d);
  const DenseOutputs e = unpack_dense(bytes);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.layer, 1);
  EXPECT_EQ(e.tokens, d.tokens);
  EXPECT_EQ(e.y, d.y);
  EXPECT_EQ(e.dx, d.dx);
  EXPECT_EQ(e.wgrad, d.wgrad);
  EXPECT_THROW(unpack_dense(std::string_view(bytes).substr(0, bytes.size() - 1)), std::runtime_error);
}

// ---- one rank, one layer, through CpuCompute ---------------------------------------

Experiment layer_experiment(int64_t seq) {
  const nlohmann::json j = {
      {"name", "dense-layer-test"},
      {"cluster", "a100-80g-1x8"},
      {"model",
       {{"name", "t"}, {"layers", 1}, {"hidden", 64}, {"heads", 2}, {"kv_heads", 1}, {"head_dim", 64},
        {"intermediate", 96}, {"vocab", 100}, {"tied_embeddings", true}}},
      {"workload", {{"seq_len", seq}, {"batch", 2}, {"pattern", "dense-causal"}}},
      {"parallel", {{"cp", 1}, {"checkpoint", "none"}}},
      {"scope", "layer"}};
  return parse_experiment(j, "dense_layer_test", "", ConfigStore{});
}

// The ops decoder_layer.cpp makes for one layer on one rank (no exchanges, so the
// QKV GEMM writes the attention's own Q and K|V), in dependency order.
schedule::Schedule layer_schedule(const Experiment& e, int64_t weight_elements) {
  using schedule::BufferRole;
  using schedule::DType;
  using schedule::OpKind;
  using schedule::Phase;
  const Model& m = e.model;
  const int64_t B = e.workload.batch, S = e.workload.seq_len, D = m.head_dim, H = m.hidden, I = m.intermediate;
  schedule::ScheduleBuilder b(e.resolved, "test");
  const int r = b.add_rank(0), st = b.add_stream(r, schedule::StreamKind::compute);
  auto act = [&](const char* n, int64_t w) { return b.add_buffer(r, n, BufferRole::activation, DType::bf16, {B * S, w}); };
  const int x0 = act("x0", H), x1 = act("x1", H), xn1 = act("xn1", H), h = act("h", H), hn = act("hn", H),
            gu = act("gu", 2 * I), a = act("act", I), dx = act("dx", H), dact = act("dact", I), dgu = act("dgu", 2 * I),
            dhn = act("dhn", H), dh = act("dh", H), dxn1 = act("dxn1", H);
  const int w = b.add_buffer(r, "weights", BufferRole::weight, DType::bf16, {weight_elements});
  const int wg = b.add_buffer(r, "wgrad", BufferRole::gradient, DType::bf16, {weight_elements});
  const std::vector<int64_t> qs{B, S, m.heads, D}, kvs{2, B, S, m.kv_heads, D};
  const int q = b.add_buffer(r, "q", BufferRole::q, DType::bf16, qs), kv = b.add_buffer(r, "kv", BufferRole::kv, DType::bf16, kvs),
            o = b.add_buffer(r, "o", BufferRole::o, DType::bf16, qs),
            lse = b.add_buffer(r, "lse", BufferRole::lse, DType::fp32, {B, m.heads, S}),
            d_o = b.add_buffer(r, "do", BufferRole::d_o, DType::bf16, qs), dq = b.add_buffer(r, "dq", BufferRole::dq, DType::bf16, qs),
            dkv = b.add_buffer(r, "dkv", BufferRole::dkv, DType::fp32, kvs);
  // Local order: the second half of the sequence, then the first.
  const int tokens = b.token_set({{{S / 2, S / 2, 0, 1}, {0, S / 2, 0, 1}}});
  std::vector<schedule::OpId> chain;
  auto op = [&](OpKind k, Phase ph, std::vector<int> reads, std::vector<int> writes, int64_t n = 0, int64_t kk = 0) {
    std::vector<schedule::OpId> deps;
    if (!chain.empty()) deps.push_back(chain.back());
    const schedule::OpId id = b.compute(r, st, k, {ph, 0, -1}, {1.0, 0, B * S}, deps);
    b.set_access(id, std::move(reads), std::move(writes));
    if (k == OpKind::gemm) b.set_gemm(id, {B * S, n, kk});
    if (k == OpKind::attn_fwd || k == OpKind::attn_bwd)
      b.set_attention(id, {tokens, tokens, 0, m.heads, 0, m.kv_heads, schedule::Mask::causal, schedule::IndexSource::none, false});
    chain.push_back(id);
  };
  const int64_t qw = int64_t(m.heads) * D, kvw = int64_t(m.kv_heads) * D;
  const auto F = Phase::forward, Bw = Phase::backward;
  op(OpKind::elementwise, F, {x0, w}, {xn1});
  op(OpKind::gemm, F, {xn1, w}, {q, kv}, qw + 2 * kvw, H);
  op(OpKind::attn_fwd, F, {q, kv}, {o, lse});
  op(OpKind::gemm, F, {o, w, x0}, {h}, H, qw);
  op(OpKind::elementwise, F, {h, w}, {hn});
  op(OpKind::gemm, F, {hn, w}, {gu}, 2 * I, H);
  op(OpKind::elementwise, F, {gu}, {a});
  op(OpKind::gemm, F, {a, w, h}, {x1}, H, I);
  op(OpKind::gemm, Bw, {dx, a, w}, {dact, wg}, H, I);
  op(OpKind::elementwise, Bw, {dact, gu}, {dgu});
  op(OpKind::gemm, Bw, {dgu, hn, w}, {dhn, wg}, 2 * I, H);
  op(OpKind::elementwise, Bw, {dhn, h, w, dx}, {dh});
  op(OpKind::gemm, Bw, {dh, w, o}, {wg, d_o}, H, qw);
  op(OpKind::attn_bwd, Bw, {q, kv, o, lse, d_o}, {dq, dkv});
  op(OpKind::gemm, Bw, {xn1, w, dq, dkv}, {dxn1, wg}, qw + 2 * kvw, H);
  op(OpKind::elementwise, Bw, {dxn1, x0, w, dh}, {dx});
  return std::move(b).build();
}

TEST(DenseLayer, OneRankLayerPassesTheCheck) {
  const Experiment e = layer_experiment(256);
  const schedule::Schedule s = layer_schedule(e, WeightLayout(e.model).total);
  const schedule::RunPlan plan(s);
  const BufferInstances in(s);
  const Layouts l(s, plan.match, e.workload.batch, e.model.head_dim);
  TensorStore store(s, 0, in.layers());
  CpuCompute c(s, e, in, store);
  c.prepare();
  const DenseLayer d(s, e, l, in, 0);
  ASSERT_TRUE(d.active());
  c.use_dense(&d);
  const uint64_t seed = 11;
  seed_inputs(s, l, store, seed);
  d.seed(store, seed);
  for (const auto& op : s.ops) c.run(op.id);
  CheckProblem p;
  p.batch = e.workload.batch, p.seq_len = e.workload.seq_len;
  p.heads = e.model.heads, p.kv_heads = e.model.kv_heads, p.head_dim = e.model.head_dim;
  p.seed = seed, p.layer = true, p.hidden = e.model.hidden, p.intermediate = e.model.intermediate;
  const CheckReport r = check_layer(p, read_outputs(s, l, in, store), {d.read_outputs(store)}, 2e-2);
  std::vector<std::string> names;
  for (const auto& t : r.tensors) {
    names.push_back(t.name);
    EXPECT_GT(t.max_ref, 0) << t.name;
    EXPECT_LT(t.max_rel_error, 2e-2) << t.name;  // bf16 storage: a few 1e-3
  }
  EXPECT_EQ(names, (std::vector<std::string>{"O", "LSE", "dQ", "dK", "dV", "y", "dx", "dW_qkv", "dW_o", "dW_gu", "dW_down"}));
  EXPECT_TRUE(r.passed());
  // Another seed's reference is far away: the comparison can fail.
  p.seed = seed + 1;
  EXPECT_FALSE(check_layer(p, read_outputs(s, l, in, store), {d.read_outputs(store)}, 2e-2).passed());
  // A token row held twice is an error, not an average.
  p.seed = seed;
  EXPECT_THROW(check_layer(p, read_outputs(s, l, in, store), {d.read_outputs(store), d.read_outputs(store)}, 2e-2),
               std::runtime_error);
}

TEST(DenseLayer, TensorParallelStaysTimingOnly) {
  Experiment e = layer_experiment(128);
  const schedule::Schedule s = layer_schedule(e, WeightLayout(e.model).total);
  const schedule::RunPlan plan(s);
  const BufferInstances in(s);
  const Layouts l(s, plan.match, e.workload.batch, e.model.head_dim);
  EXPECT_TRUE(DenseLayer(s, e, l, in, 0).active());
  e.parallel.tp = 2;
  const DenseLayer d(s, e, l, in, 0);
  EXPECT_FALSE(d.active());
  for (const auto& op : s.ops) EXPECT_FALSE(d.runs(op.id));
}

TEST(DenseLayer, RefusesWeightsOfAnotherSize) {
  const Experiment e = layer_experiment(128);
  const schedule::Schedule s = layer_schedule(e, WeightLayout(e.model).total + 1);
  const schedule::RunPlan plan(s);
  const BufferInstances in(s);
  const Layouts l(s, plan.match, e.workload.batch, e.model.head_dim);
  try {
    DenseLayer d(s, e, l, in, 0);
    FAIL() << "accepted";
  } catch (const schedule::ScheduleError& x) {
    EXPECT_NE(std::string(x.what()).find("buffer weights holds"), std::string::npos) << x.what();
  }
}

}  // namespace
}  // namespace rm::runtime
