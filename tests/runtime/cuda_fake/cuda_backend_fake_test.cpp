// The cuda backend's host logic, run on the fake device (fake_device.hpp): every
// rank of exported Schedules emulated in this process (--emulate-ranks), the
// streams run in seeded random orders that honour only stream order and the
// backend's event waits. Oracles: the outputs (O, LSE, dQ, dK|dV) equal the
// single-rank run of the same experiment within the bf16 bound, are bit-identical
// whatever the device's order (no race), every op has one sample, and measured
// times respect every dependency. What this cannot see: the real CUDA kernels
// (kernels/cuda has its own tests) and NCCL (multi-process only).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <span>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fake_device.hpp"
#include "kernels/bf16.hpp"
#include "runtime/buffer_instances.hpp"
#include "runtime/cpu_compute.hpp"
#include "runtime/check.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/index_reference.hpp"
#include "runtime/inputs.hpp"
#include "runtime/layouts.hpp"
#include "runtime/pattern_index.hpp"
#include "runtime/world.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/support/run_cli.hpp"

namespace rm::runtime {
namespace {

World& world() {
  static World w(nullptr, nullptr);
  return w;
}

using Key = std::tuple<int, int, int64_t, int32_t, int32_t>;  // content, part, batch, head, token
using Outputs = std::map<Key, std::vector<float>>;

struct Result {
  Outputs out;
  std::vector<OpSample> times;
  schedule::Schedule s;
};

Result run(const std::string& path, uint64_t order_seed) {
  Result r;
  r.s = schedule::read_schedule(path);
  const Experiment e = parse_experiment(r.s.experiment, path, "", ConfigStore{});
  const schedule::RunPlan plan(r.s);
  const BufferInstances in(r.s);
  const Layouts layouts(r.s, plan.match, e.workload.batch, e.model.head_dim);
  LaunchOptions o;
  o.schedule = path;
  o.emulate_ranks = int(r.s.ranks.size());
  CudaBackend b(CudaInputs{r.s, e, plan, in, layouts}, world(), o);
  b.seed(1);
  fake::set_seed(order_seed);
  b.run_once();  // a first pass, as the warm-up: the second must not depend on what it left behind
  r.times = b.run_once();
  b.download();
  const int64_t B = e.workload.batch;
  for (int rank : b.ranks())
    for (const OutputSlice& sl : read_outputs(r.s, layouts, in, b.host(rank))) {
      const Layout& l = sl.layout;
      const int parts = l.kv_like() ? 2 : 1;
      const int64_t rows = parts * B * int64_t(l.heads.size()) * int64_t(l.tokens.size());
      const int64_t width = rows ? int64_t(sl.values.size()) / rows : 0;
      for (int part = 0; part < parts; ++part)
        for (int64_t bb = 0; bb < B; ++bb)
          for (size_t h = 0; h < l.heads.size(); ++h)
            for (size_t t = 0; t < l.tokens.size(); ++t) {
              const int64_t row = l.row(part, bb, int64_t(h), int64_t(t), B);
              r.out[{int(l.content), part, bb, l.heads[h], l.tokens[t]}].assign(
                  sl.values.begin() + row * width, sl.values.begin() + (row + 1) * width);
            }
    }
  return r;
}

class CudaBackendFake : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::filesystem::path(test::temp_dir("ringmaster_cuda_fake")); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  // Exports the tiny experiment with `sets` and returns the file.
  static std::string schedule(const std::string& name, const std::string& sets) {
    const std::string path = (*dir_ / (name + ".json")).string();
    const auto r = test::run_cli(
        "schedule --set cluster=h200-1x8 --set workload.seq_len=1024 --set workload.pattern=dense-causal "
        "--set model.layers=1 --set model.heads=4 --set model.kv_heads=2 --set model.head_dim=64 --set model.hidden=256 "
        "--set model.intermediate=512 --set model.vocab=1000 --set parallel.checkpoint=none --set parallel.shuffle=once " +
        sets + " -o '" + path + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }
  // The distributed run against the one-rank run, in three device orders.
  static void expect_matches(const std::string& distributed, const std::string& single) {
    const Result ref = run(single, 1);
    ASSERT_FALSE(ref.out.empty());
    Outputs first;
    for (uint64_t order : {1u, 2u, 3u}) {
      const Result got = run(distributed, order);
      expect_times_respect_dependencies(got);
      if (order == 1) first = got.out;
      else EXPECT_TRUE(got.out == first) << "outputs depend on the device's order (a missing wait)";
      std::map<int, double> err, scale;
      for (const auto& [key, want] : ref.out) {
        const auto it = got.out.find(key);
        ASSERT_NE(it, got.out.end()) << "content " << std::get<0>(key) << " head " << std::get<3>(key) << " token "
                                     << std::get<4>(key) << " missing";
        ASSERT_EQ(it->second.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          if (std::isinf(want[i]) && want[i] == it->second[i]) continue;
          err[std::get<0>(key)] = std::max(err[std::get<0>(key)], double(std::fabs(it->second[i] - want[i])));
          scale[std::get<0>(key)] = std::max(scale[std::get<0>(key)], double(std::fabs(want[i])));
        }
      }
      EXPECT_EQ(err.size(), 4u) << "O, LSE, dQ and dK|dV are all compared";
      for (const auto& [content, e] : err)
        EXPECT_LE(e / std::max(scale[content], 1e-30), 2e-2)
            << "content " << schedule::to_string(schedule::BufferRole(content)) << " order " << order;
    }
  }
  static void expect_times_respect_dependencies(const Result& r) {
    std::vector<const OpSample*> of(r.s.ops.size(), nullptr);
    for (const OpSample& t : r.times) {
      ASSERT_EQ(of[size_t(t.op)], nullptr) << "op " << t.op << " sampled twice";
      of[size_t(t.op)] = &t;
      EXPECT_LE(t.start_s, t.end_s) << schedule::describe(r.s, t.op);
    }
    for (const auto& op : r.s.ops) {
      ASSERT_NE(of[size_t(op.id)], nullptr) << schedule::describe(r.s, op.id) << " has no sample";
      for (schedule::OpId d : op.deps)
        EXPECT_LE(of[size_t(d)]->end_s, of[size_t(op.id)]->start_s)
            << schedule::describe(r.s, op.id) << " starts before its dependency " << schedule::describe(r.s, d) << " ends";
    }
  }
  static inline std::filesystem::path* dir_ = nullptr;
};

// Every buffer random (bf16-exact values in [-1, 1)), then the seeded inputs: the dense
// parts' activations and weights are not seeded by seed_inputs, and zeros would hide a GEMM.
void fill_then_seed(const schedule::Schedule& s, const Layouts& layouts, TensorStore& store) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const auto& buf : s.buffers) {
    auto bytes = store.bytes(buf.id, -1);
    if (buf.dtype == schedule::DType::fp32)
      for (auto& x : std::span(reinterpret_cast<float*>(bytes.data()), bytes.size() / 4)) x = kernels::round_bf16(u(rng));
    else if (buf.dtype == schedule::DType::bf16)
      for (auto& x : std::span(reinterpret_cast<uint16_t*>(bytes.data()), bytes.size() / 2)) x = kernels::to_bf16(u(rng));
  }
  seed_inputs(s, layouts, store, 1);
}

// One rank, compute only: after one run every buffer equals what the cpu backend's op
// semantics (CpuCompute, ops in id order) leave in it — the attention merges, dQ and
// dK|dV stores, cuBLAS's column-major call for the row-major GEMMs, short inputs padded.
void expect_same_buffers_as_cpu(const std::string& path) {
  const schedule::Schedule s = schedule::read_schedule(path);
  ASSERT_EQ(s.ranks.size(), 1u);
  const Experiment e = parse_experiment(s.experiment, path, "", ConfigStore{});
  const schedule::RunPlan plan(s);
  const BufferInstances in(s);
  const Layouts layouts(s, plan.match, e.workload.batch, e.model.head_dim);
  TensorStore cpu(s, 0, in.layers());
  fill_then_seed(s, layouts, cpu);
  CpuCompute compute(s, e, in, cpu);
  compute.prepare();
  for (const auto& op : s.ops) {
    ASSERT_TRUE(schedule::is_compute(op.kind)) << schedule::describe(s, op.id);
    compute.run(op.id);
  }
  LaunchOptions o;
  o.schedule = path;
  o.emulate_ranks = 1;
  CudaBackend b(CudaInputs{s, e, plan, in, layouts}, world(), o);
  fill_then_seed(s, layouts, b.host(0));
  b.upload();
  fake::set_seed(5);
  b.run_once();
  b.download();
  int compared = 0;
  for (const auto& buf : s.buffers) {
    if (buf.dtype == schedule::DType::int32) continue;
    const auto want = cpu.bytes(buf.id, -1), got = b.host(0).bytes(buf.id, -1);
    ASSERT_EQ(want.size(), got.size());
    double err = 0, scale = 0;
    for (size_t i = 0; i < want.size() / size_t(schedule::dtype_bytes(buf.dtype)); ++i) {
      const auto value = [&](std::span<std::byte> x) {
        return buf.dtype == schedule::DType::fp32 ? double(reinterpret_cast<const float*>(x.data())[i])
                                                  : double(kernels::from_bf16(reinterpret_cast<const uint16_t*>(x.data())[i]));
      };
      const double w = value(want), g = value(got);
      if (std::isinf(w) && w == g) continue;
      err = std::max(err, std::fabs(g - w)), scale = std::max(scale, std::fabs(w));
    }
    EXPECT_LE(err, 1e-2 * std::max(scale, 1e-30)) << "buffer '" << buf.name << "'";
    ++compared;
  }
  EXPECT_GT(compared, 4);
}

TEST_F(CudaBackendFake, OneRankAttentionEqualsTheCpuBackend) {
  expect_same_buffers_as_cpu(schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, OneRankLayerEqualsTheCpuBackend) {
  expect_same_buffers_as_cpu(schedule("layer1", "--set parallel.cp=1 --set scope=layer --set workload.seq_len=512"));
}

// One process per rank under mpirun, NCCL carried by MPI (runtime_cuda_fake_run): the
// p2p channels, group communicators, grouped runs and collectives in issue order.
void expect_multi_process_matches(int np, const std::string& distributed, const std::string& single) {
  // This process is an MPI singleton (world()): its launcher variables must not reach mpirun.
  const std::string cmd = "for v in $(env | grep -oE '^(OMPI|PMIX|OPAL|ORTE|PRTE)[A-Za-z0-9_]*'); do unset $v; done; " +
                          std::string(RINGMASTER_MPIRUN) + " --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
                          " " + RINGMASTER_FAKE_RUN_BIN + " '" + distributed + "' '" + single + "' 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("dkv: max relative error"), std::string::npos) << out;
}

TEST_F(CudaBackendFake, NcclZigzagRingOfFourProcesses) {
  expect_multi_process_matches(4, schedule("zigzag4", "--set parallel.cp=4 --set parallel.ring=ring "
                                                      "--set parallel.partition=zigzag --set scope=attention_fwd_bwd"),
                               schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, NcclDoubleRingTwoByTwo) {
  expect_multi_process_matches(4, schedule("dring", "--set parallel.cp=2 --set parallel.hp=2 --set parallel.ring=double_ring "
                                                    "--set parallel.window=2 --set scope=attention_fwd_bwd"),
                               schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, NcclPerCallShuffleAndUlysses) {
  expect_multi_process_matches(2, schedule("percall", "--set parallel.cp=2 --set parallel.ring=ring --set parallel.partition=stripe "
                                                      "--set parallel.stripe_tokens=128 --set parallel.shuffle=per_call "
                                                      "--set scope=attention_fwd_bwd"),
                               schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
  expect_multi_process_matches(2, schedule("ulysses", "--set parallel.cp=1 --set parallel.hp=2 --set scope=attention_fwd_bwd"),
                               schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, NcclCollectivesOfTensorAndDataParallel) {
  expect_multi_process_matches(2, schedule("tp2", "--set parallel.cp=1 --set parallel.tp=2 --set scope=layer "
                                                  "--set workload.seq_len=512"),
                               schedule("layer1", "--set parallel.cp=1 --set scope=layer --set workload.seq_len=512"));
  expect_multi_process_matches(2, schedule("dp2", "--set parallel.cp=1 --set parallel.dp=2 --set scope=step "
                                                  "--set workload.seq_len=512"),
                               schedule("step1", "--set parallel.cp=1 --set scope=step --set workload.seq_len=512"));
}

TEST_F(CudaBackendFake, ZigzagRingOfFour) {
  expect_matches(schedule("zigzag4", "--set parallel.cp=4 --set parallel.ring=ring --set parallel.partition=zigzag "
                                     "--set scope=attention_fwd_bwd"),
                 schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, StripeRingOfFourWithBf16Gradients) {
  expect_matches(schedule("stripe4", "--set parallel.cp=4 --set parallel.ring=ring --set parallel.partition=stripe "
                                     "--set parallel.stripe_tokens=128 --set parallel.grad_comm_dtype=bf16 "
                                     "--set scope=attention_fwd_bwd"),
                 schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, DoubleRingTwoByTwo) {
  expect_matches(schedule("dring", "--set parallel.cp=2 --set parallel.hp=2 --set parallel.ring=double_ring "
                                   "--set parallel.window=2 --set scope=attention_fwd_bwd"),
                 schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, UlyssesAllToAll) {
  expect_matches(schedule("ulysses", "--set parallel.cp=1 --set parallel.hp=2 --set scope=attention_fwd_bwd"),
                 schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

TEST_F(CudaBackendFake, PerCallShuffleRing) {
  // MTraining's shuffle inside the attention call: all-to-alls around the ring.
  expect_matches(schedule("percall", "--set parallel.cp=2 --set parallel.ring=ring --set parallel.partition=stripe "
                                     "--set parallel.stripe_tokens=128 --set parallel.shuffle=per_call "
                                     "--set scope=attention_fwd_bwd"),
                 schedule("one", "--set parallel.cp=1 --set scope=attention_fwd_bwd"));
}

// Sequence-parallel all-gathers and reduce-scatters (tp), ZeRO's over dp: run, sampled, ordered.
TEST_F(CudaBackendFake, TensorParallelLayer) {
  expect_matches(schedule("tp2", "--set parallel.cp=1 --set parallel.tp=2 --set scope=layer --set workload.seq_len=512"),
                 schedule("layer1", "--set parallel.cp=1 --set scope=layer --set workload.seq_len=512"));
}

TEST_F(CudaBackendFake, DataParallelStep) {
  expect_matches(schedule("dp2", "--set parallel.cp=1 --set parallel.dp=2 --set scope=step --set workload.seq_len=512"),
                 schedule("step1", "--set parallel.cp=1 --set scope=step --set workload.seq_len=512"));
}

TEST_F(CudaBackendFake, LayerScopeWithGemms) {
  expect_matches(schedule("layer2", "--set parallel.cp=2 --set parallel.ring=ring --set scope=layer --set workload.seq_len=512"),
                 schedule("layer1", "--set parallel.cp=1 --set scope=layer --set workload.seq_len=512"));
}

// Dynamic sparse patterns: every index_build stage is a host round trip (its buffers
// down, the cpu stage, its outputs up) and the conversion uploads the tile plans per
// batch element. Oracles: the built index equals the single-process reference's
// exactly (seeded inputs), the outputs pass --check's comparison against the reference
// attention on those picks, in two device orders, and times respect every dependency.
TEST_F(CudaBackendFake, DynamicIndexBuildingRoundTripsThroughTheHost) {
  for (const auto& [name, sets] :
       {std::pair{"dyn-budgets", "--set parallel.cp=2 --set parallel.ring=ring --set parallel.partition=stripe "
                                 "--set parallel.stripe_tokens=128 --set parallel.shuffle=per_call --set scope=attention_fwd_bwd "
                                 "--set workload.pattern=tiny-dynamic-vs --set kernel.attention=block_sparse "
                                 "--set workload.seq_len=1024"},
        std::pair{"dyn-topp-b2", "--set parallel.cp=2 --set parallel.ring=ring --set parallel.partition=contiguous "
                                 "--set scope=attention_fwd_bwd --set workload.pattern=tiny-topp-vs "
                                 "--set kernel.attention=block_sparse --set workload.seq_len=1024 --set workload.batch=2"}}) {
    const std::string path = schedule(name, sets);
    const schedule::Schedule s = schedule::read_schedule(path);
    const Experiment e = parse_experiment(s.experiment, path, "", ConfigStore{});
    const schedule::RunPlan plan(s);
    const BufferInstances in(s);
    const Layouts layouts(s, plan.match, e.workload.batch, e.model.head_dim);
    ASSERT_TRUE(std::any_of(s.ops.begin(), s.ops.end(), [](const auto& op) { return op.kind == schedule::OpKind::index_build; }));
    LaunchOptions o;
    o.schedule = path;
    o.emulate_ranks = int(s.ranks.size());
    CudaBackend b(CudaInputs{s, e, plan, in, layouts}, world(), o);
    b.seed(1);
    const ReferenceIndex ref = reference_index(s, e, layouts, plan.match, seeded_qk(1), 0);
    for (uint64_t order : {1u, 2u}) {
      fake::set_seed(order);
      Result r;
      r.s = s;
      b.run_once();
      r.times = b.run_once();
      expect_times_respect_dependencies(r);
      b.download();
      const BuiltIndex got = unpack_built_index({b.built_index(0)}, e.workload.batch, e.model.heads);
      const TensorCheck idx = check_built_index(ref, got);
      EXPECT_TRUE(idx.passed()) << name << ": " << idx.max_abs_error << " heads differ";
      std::vector<OutputSlice> slices;
      for (int rank : b.ranks())
        for (auto& x : read_outputs(s, layouts, in, b.host(rank))) slices.push_back(std::move(x));
      CheckProblem c;
      c.batch = e.workload.batch, c.seq_len = e.workload.seq_len;
      c.heads = e.model.heads, c.kv_heads = e.model.kv_heads, c.head_dim = e.model.head_dim;
      c.causal = pattern_causal(e), c.seed = 1, c.backward = true, c.built = true;
      c.per_batch = got.per_batch;
      c.index = c.per_batch.at(0);
      const CheckReport rep = check_attention(c, slices, 2e-2);
      for (const auto& t : rep.tensors) EXPECT_TRUE(t.passed()) << name << " " << t.name << " " << t.max_rel_error;
    }
  }
}

}  // namespace
}  // namespace rm::runtime
