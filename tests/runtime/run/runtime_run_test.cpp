// ringmaster-run end to end: Schedules exported by the real CLI, run under
// mpirun with 2 and 4 processes on the cpu backend. Every attention kind the
// generators make must pass --check (forward and backward against the
// single-process reference); bad input is refused on every rank with one line;
// a rank that fails, hangs or is killed ends the whole run within 30 s, named.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/measured_timeline.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/support/run_cli.hpp"
#include "traces/chrome_trace.hpp"

namespace {

using ::testing::HasSubstr;

struct Shell {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;
};

// Runs `cmd` in a shell; stdout and stderr captured apart.
Shell sh(const std::string& cmd) {
  static int counter = 0;
  const std::string errfile = "/tmp/rm_run_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  Shell r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen((cmd + " 2>" + errfile).c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = rm::test::slurp(errfile);
  std::remove(errfile.c_str());
  return r;
}

const std::string kMpirun = std::string(RINGMASTER_MPIRUN) + " --allow-run-as-root --oversubscribe";

// A 2-layer GQA model small enough for CPU runs (head_dim 64: the kernels' smallest), on a
// 2 x 2 cluster so hierarchical rings have 2-rank nodes. The GPU model only picks
// the cost tables the export needs; the runtime ignores it.
const char* kTiny = R"({"name": "runtime-test",
 "cluster": {"name": "cpu-test", "gpu": {"model": "A100-SXM4-80GB", "memory_GB": 80, "peak_tflops_bf16": 312, "hbm_bandwidth_GBps": 2039},
             "nodes": 2, "gpus_per_node": 2, "intra_node": {"kind": "nvswitch", "bandwidth_GBps": 5, "latency_us": 2.0},
             "pcie": {"bandwidth_GBps": 5, "latency_us": 1.0}, "nics_per_node": 2,
             "nic": {"bandwidth_Gbps": 40, "latency_us": 2.0}, "fabric": {"kind": "single_switch", "switch_latency_us": 0.5},
             "cost": {"gemm_efficiency": 0.5, "elementwise_efficiency": 0.5, "kernel_launch_us": 1.0,
                      "link_efficiency": {"nvlink": 0.8, "pcie": 0.8, "network": 0.8}}},
 "model": "tiny-gqa-2l",
 "workload": {"seq_len": 2048, "batch": 1, "pattern": "dense-causal"},
 "parallel": {"dp": 1, "hp": 1, "cp": 2, "partition": "zigzag", "ring": "ring", "placement": "head_first",
              "checkpoint": "full", "shuffle": "once", "grad_comm_dtype": "fp32", "ring_order": "rank"},
 "kernel": {"attention": "fa2"}, "scope": "attention_fwd_bwd"})";

class RuntimeRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(rm::test::temp_dir("ringmaster_runtime_run"));
    std::ofstream(*dir_ / "tiny.json") << kTiny;
  }
  static std::string dir() { return dir_->string(); }
  // Exports the experiment with `sets` (" --set k=v ..."); returns the Schedule path.
  static std::string schedule(const std::string& name, const std::string& sets) {
    const std::string path = dir() + "/" + name + ".json.gz";
    const Shell r = sh("cd '" + dir() + "' && '" RINGMASTER_BIN "' schedule tiny.json " + sets + " -o '" + path + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }
  static Shell run(int np, const std::string& args, int timeout_s = 120) {
    return sh("cd '" + dir() + "' && timeout " + std::to_string(timeout_s) + " " + kMpirun + " -np " +
              std::to_string(np) + " '" RINGMASTER_RUN_BIN "' " + args);
  }
  static nlohmann::json load(const std::string& path) { return nlohmann::json::parse(sh("zcat -f '" + path + "'").out); }

 private:
  static inline std::filesystem::path* dir_ = nullptr;
};

struct Kind {
  const char* name;
  const char* generator;  // what the export must have built (docs/generators.md)
  const char* sets;
};

const Kind kKinds[] = {
    {"ring_contiguous", "contiguous-ring", "--set parallel.partition=contiguous"},
    {"ring_zigzag", "zigzag-ring", ""},
    {"ring_stripe", "stripe-ring", "--set parallel.partition=stripe"},
    {"ring_balanced", "balanced-ring", "--set parallel.partition=balanced"},
    {"stripe_per_call_shuffle", "stripe-ring", "--set parallel.partition=stripe --set parallel.shuffle=per_call --set parallel.cp=4"},
    {"hierarchical_2rank_nodes", "zigzag-hierarchical", "--set parallel.cp=4 --set parallel.ring=hierarchical"},
    {"double_ring_w2", "zigzag-double_ring", "--set parallel.cp=4 --set parallel.ring=double_ring --set parallel.window=2"},
    {"two_d_hp2_double_ring", "2d-stripe-double_ring", "--set parallel.hp=2 --set parallel.ring=double_ring --set parallel.partition=stripe "
                              "--set parallel.shuffle=per_call"},
    {"ulysses_hp2", "ulysses", "--set parallel.hp=2 --set parallel.cp=1"},
    {"sparse_vs_zigzag", "zigzag-ring", "--set workload.pattern=tiny-static-vs --set kernel.attention=block_sparse "
                         "--set workload.seq_len=4096"},
    {"sparse_vs_stripe_hierarchical", "stripe-hierarchical", "--set workload.pattern=tiny-static-vs --set kernel.attention=block_sparse "
                                      "--set workload.seq_len=4096 --set parallel.partition=stripe --set parallel.cp=4 "
                                      "--set parallel.ring=hierarchical"},
    {"forward_only", "zigzag-ring", "--set scope=attention_fwd"},
    // Dynamic patterns: the index_build ops run, and --check compares the index too.
    {"dynamic_budgets_stripe_per_call", "stripe-ring", "--set workload.pattern=tiny-dynamic-vs --set kernel.attention=block_sparse "
                                        "--set workload.seq_len=4096 --set parallel.partition=stripe --set parallel.shuffle=per_call"},
    {"dynamic_top_p_contiguous", "contiguous-ring", "--set workload.pattern=tiny-topp-vs --set kernel.attention=block_sparse "
                                 "--set workload.seq_len=4096 --set parallel.partition=contiguous"},
    {"dynamic_budgets_2d_hp2", "2d-stripe-ring", "--set workload.pattern=tiny-dynamic-vs --set kernel.attention=block_sparse "
                               "--set workload.seq_len=4096 --set parallel.hp=2 --set parallel.partition=stripe "
                               "--set parallel.shuffle=per_call"},
    // One index per (batch element, head), as MTraining builds it.
    {"dynamic_budgets_batch2", "stripe-ring", "--set workload.pattern=tiny-dynamic-vs --set kernel.attention=block_sparse "
                               "--set workload.seq_len=4096 --set workload.batch=2 --set parallel.partition=stripe "
                               "--set parallel.shuffle=per_call"},
    {"dynamic_top_p_batch2", "contiguous-ring", "--set workload.pattern=tiny-topp-vs --set kernel.attention=block_sparse "
                             "--set workload.seq_len=4096 --set workload.batch=2 --set parallel.partition=contiguous"},
    // The zigzag per-call shuffle (pairs c, cp-1-c) at cp = 2, where it yields the
    // zigzag chunks from the contiguous layout the index is built on (issue 41; at
    // cp > 2 the export is refused: TheExportRefusesAZigzagShuffleTheIndexCannotPrecede).
    {"dynamic_top_p_zigzag_per_call", "zigzag-ring", "--set workload.pattern=tiny-topp-vs --set kernel.attention=block_sparse "
                                      "--set workload.seq_len=4096 --set parallel.shuffle=per_call"},
};

class AttentionKinds : public RuntimeRun, public ::testing::WithParamInterface<Kind> {};

TEST_P(AttentionKinds, PassesCheckForwardAndBackward) {
  const Kind k = GetParam();
  const std::string s = schedule(k.name, k.sets);
  const nlohmann::json j = load(s);
  ASSERT_EQ(j["generator"], k.generator);
  const int np = int(j["ranks"].size());
  const Shell r = run(np, "--schedule '" + s + "' --check --warmup 0 --iters 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("check against the single-process reference"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("ABOVE THE BOUND")));
  const bool backward = std::string(k.name) != "forward_only";
  for (const char* t : {"O ", "LSE "}) EXPECT_THAT(r.out, HasSubstr(std::string("  ") + t)) << t;
  for (const char* t : {"dQ ", "dK ", "dV "})
    EXPECT_EQ(r.out.find(std::string("  ") + t) != std::string::npos, backward) << t;
  EXPECT_THAT(r.out, HasSubstr(std::to_string(np) + " ranks (runtime-cpu), 2 timed iterations"));
  const bool dynamic = std::string(k.name).rfind("dynamic", 0) == 0;
  EXPECT_EQ(r.out.find("  index ") != std::string::npos, dynamic) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Runtime, AttentionKinds, ::testing::ValuesIn(kKinds),
                         [](const auto& p) { return std::string(p.param.name); });

void expect_refused(const Shell& r, const std::string& what);

// The measured Timeline: every op of the Schedule once, K samples each, in the
// predicted Timelines' schema, and its times respect every ordering the run driver
// promises (within the clock alignment's stated uncertainty).
TEST_F(RuntimeRun, TheTraceHoldsEveryOpOnceAndRespectsEveryDependency) {
  for (const auto& [name, sets] : {std::pair{"trace2", ""}, std::pair{"trace4", "--set parallel.hp=2 --set parallel.ring=double_ring "
                                                                               "--set parallel.partition=stripe --set parallel.shuffle=per_call"}}) {
    const std::string s = schedule(name, sets);
    const std::string trace = dir() + "/" + name + "-measured.json";
    const rm::schedule::Schedule sched = rm::schedule::read_schedule(s);
    const Shell r = run(int(sched.ranks.size()), "--schedule '" + s + "' --iters 3 --warmup 1 --trace '" + trace + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("measured Timeline written to"));
    const rm::traces::Timeline t = rm::traces::read_chrome_trace(trace);
    EXPECT_EQ(t.source, rm::traces::Source::runtime_cpu);
    EXPECT_EQ(t.metadata["schedule_hash"], rm::schedule::schedule_hash(sched));
    EXPECT_EQ(t.metadata["iterations"], 3);
    ASSERT_EQ(t.events.size(), sched.ops.size());
    std::vector<int> seen(sched.ops.size(), 0);
    for (const auto& e : t.events) {
      ASSERT_GE(e.op, 0);
      ++seen[size_t(e.op)];
      EXPECT_EQ(e.rank, sched.ops[size_t(e.op)].rank);
      EXPECT_EQ(e.stream, sched.ops[size_t(e.op)].stream);
      EXPECT_EQ(e.samples, 3);
      EXPECT_GE(e.end_s, e.start_s);
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(sched.ops.size()));
    const double tolerance = t.metadata["max_clock_uncertainty_s"].get<double>();
    EXPECT_LT(tolerance, 1e-3);
    const auto bad = rm::runtime::dependency_violations(sched, t, tolerance);
    EXPECT_TRUE(bad.empty()) << bad.front();
  }
}

TEST_F(RuntimeRun, JsonSummary) {
  const std::string s = schedule("json", "");
  const Shell r = run(2, "--schedule '" + s + "' --check --iters 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["iterations"], 2);
  EXPECT_GT(j["iteration_s"]["median"].get<double>(), 0.0);
  EXPECT_TRUE(j["check"]["passed"].get<bool>());
  EXPECT_EQ(j["check"]["tensors"].size(), 5u);
  EXPECT_FALSE(j["kinds"].empty());
}

TEST_F(RuntimeRun, RefusesATraceIntoAMissingFolder) {
  const std::string s = schedule("trace-folder", "");
  expect_refused(run(2, "--schedule '" + s + "' --trace /nonexistent/dir/t.json"), "does not exist");
  // A directory, before the run (it used to fail after it, exit 3); an empty path is a usage error.
  expect_refused(run(2, "--schedule '" + s + "' --trace '" + dir() + "'"), "is a directory, expected a file");
  const Shell empty = run(2, "--schedule '" + s + "' --trace ''");
  EXPECT_EQ(empty.exit_code, 2) << empty.out << empty.err;
  EXPECT_THAT(empty.err, HasSubstr("an empty output path"));
}

// A lost ring step at cp = 8 moves O, dQ and dK by less than the bf16 bound; the
// fp32-path bound on LSE and dV (docs/runtime-check.md) is what catches it.
TEST_F(RuntimeRun, ALostRingStepFailsTheCheckAtCp8) {
  const std::string s = schedule("lost-step", "--set parallel.cp=8 --set cluster.gpus_per_node=8");
  const rm::schedule::Schedule sched = rm::schedule::read_schedule(s);
  for (const auto kind : {rm::schedule::OpKind::attn_fwd, rm::schedule::OpKind::attn_bwd}) {
    rm::schedule::OpId last = -1;  // rank 0's op of this kind at the last ring step
    for (const auto& op : sched.ops)
      if (op.rank == 0 && op.kind == kind && (last < 0 || op.step >= sched.ops[size_t(last)].step)) last = op.id;
    ASSERT_GE(last, 0);
    ASSERT_EQ(sched.ops[size_t(last)].step, 7);
    const Shell r = run(8, "--schedule '" + s + "' --check --iters 1 --inject-fault 0:" + std::to_string(last) + ":skip");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_THAT(r.out, ::testing::ContainsRegex("dV .* 1e-04  ABOVE THE BOUND")) << r.out;
  }
}

TEST_F(RuntimeRun, CheckFailsAboveItsBound) {
  const std::string s = schedule("bound", "");
  const Shell r = run(2, "--schedule '" + s + "' --check --check-bound 1e-9 --iters 1");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ABOVE THE BOUND"));
  EXPECT_THAT(r.err, HasSubstr("--check: an error is above the bound"));
}

// The layer scope with its dense parts: the attention's tensors, the layer output,
// its input gradient and every GEMM's weight gradient against the reference layer.
TEST_F(RuntimeRun, LayerScopePassesCheck) {
  for (const auto& [name, sets] : {std::pair{"layer-ring", "--set scope=layer"},
                                   std::pair{"layer-ulysses", "--set scope=layer --set parallel.hp=2 --set parallel.cp=1 "
                                                              "--set parallel.checkpoint=selective"}}) {
    const std::string s = schedule(name, sets);
    const Shell r = run(2, "--schedule '" + s + "' --check --iters 1 --warmup 1");
    EXPECT_EQ(r.exit_code, 0) << name << r.out << r.err;
    for (const char* t : {"O ", "dV ", "y ", "dx ", "dW_qkv ", "dW_o ", "dW_gu ", "dW_down "})
      EXPECT_THAT(r.out, HasSubstr(std::string("  ") + t)) << name << " " << t;
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("ABOVE THE BOUND"))) << name;
    EXPECT_THAT(r.out, HasSubstr("2 ranks (runtime-cpu), 1 timed iterations"));
  }
}

// A built index in the layer scope: picked from Q and K after the QKV GEMM, whose
// fp32 sums differ from the reference's by rounding; the picks are compared allowing
// near-ties only (the index line counts them), the attention on the run's own picks.
TEST_F(RuntimeRun, LayerScopeWithABuiltIndexPassesCheck) {
  for (const auto& [name, sets] :
       {std::pair{"layer-dynamic", "--set scope=layer --set workload.pattern=tiny-dynamic-vs --set kernel.attention=block_sparse "
                                   "--set workload.seq_len=4096 --set parallel.partition=stripe --set parallel.shuffle=per_call"},
        std::pair{"layer-topp", "--set scope=layer --set workload.pattern=tiny-topp-vs --set kernel.attention=block_sparse "
                                "--set workload.seq_len=4096 --set parallel.partition=contiguous"}}) {
    const std::string s = schedule(name, sets);
    const Shell r = run(2, "--schedule '" + s + "' --check --iters 1 --warmup 0");
    EXPECT_EQ(r.exit_code, 0) << name << r.out << r.err;
    for (const char* t : {"O ", "dQ ", "y ", "dx ", "dW_qkv ", "index "})
      EXPECT_THAT(r.out, HasSubstr(std::string("  ") + t)) << name << " " << t;
    EXPECT_THAT(r.out, HasSubstr("near-tie pick")) << name;
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("ABOVE THE BOUND"))) << name;
  }
  const std::string b2 = schedule("layer-dynamic-b2", "--set scope=layer --set workload.pattern=tiny-dynamic-vs "
                                                      "--set kernel.attention=block_sparse --set workload.seq_len=4096 "
                                                      "--set workload.batch=2 --set parallel.partition=contiguous");
  expect_refused(run(2, "--schedule '" + b2 + "' --check"), "needs batch 1");
}

// The step scope (tp = 1): the per-token loss, every weight gradient after the
// replicas' reduction and every parameter after AdamW against the reference step.
const char* const kStepTensors[] = {"loss ", "dW_qkv ", "W_qkv' ", "dW_o ", "dW_gu ", "dW_down ", "W_down' ", "dE ", "E' ", "norm_f' "};
const std::string kStep = "--set scope=step --set workload.seq_len=512";

TEST_F(RuntimeRun, StepScopePassesCheck) {
  // cp = 2 with ZeRO 1 (reduce-scatter, AdamW on shards, all-gather); dp = 2 x cp = 2 with
  // ZeRO 0 (all-reduce over 4 replicas) and ZeRO 3 (gathers before each layer).
  for (const auto& [name, np, sets] :
       {std::tuple{"step-cp2-zero1", 2, kStep},
        std::tuple{"step-dp2-cp2-zero0", 4, kStep + " --set parallel.dp=2 --set parallel.zero_stage=0"},
        std::tuple{"step-dp2-cp2-zero3", 4, kStep + " --set parallel.dp=2 --set parallel.zero_stage=3"}}) {
    const std::string s = schedule(name, sets);
    const Shell r = run(np, "--schedule '" + s + "' --check --iters 1 --warmup 0", 240);
    EXPECT_EQ(r.exit_code, 0) << name << r.out << r.err;
    for (const char* t : kStepTensors) EXPECT_THAT(r.out, HasSubstr(std::string("  ") + t)) << name << " " << t;
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("ABOVE THE BOUND"))) << name;
    EXPECT_THAT(r.out, HasSubstr(std::to_string(np) + " ranks (runtime-cpu), 1 timed iterations"));
  }
}

// A lost ring step (an attention op skipped), a skipped gradient reduce-scatter and a
// skipped ZeRO parameter gather each fail the step's check.
TEST_F(RuntimeRun, StepScopeFaultsFailTheCheck) {
  const std::string s = schedule("step-faults", kStep);
  const rm::schedule::Schedule sched = rm::schedule::read_schedule(s);
  rm::schedule::OpId ring = -1, reduce = -1, gather = -1;
  for (const auto& op : sched.ops) {
    if (op.rank != 1) continue;
    if (op.kind == rm::schedule::OpKind::attn_bwd && op.layer == 0 && op.step == 1) ring = op.id;
    if (op.kind == rm::schedule::OpKind::reduce_scatter && op.layer == 0) reduce = op.id;
    if (op.kind == rm::schedule::OpKind::all_gather && op.phase == rm::schedule::Phase::optimizer && op.layer == 0)
      gather = op.id;
  }
  ASSERT_GE(ring, 0);
  ASSERT_GE(reduce, 0);
  ASSERT_GE(gather, 0);
  for (const auto& [op, what] : {std::pair{ring, "dW_qkv .*ABOVE THE BOUND"}, std::pair{reduce, "dW_down .*ABOVE THE BOUND"},
                                 std::pair{gather, "W_qkv' .*ABOVE THE BOUND"}}) {
    const Shell r = run(2, "--schedule '" + s + "' --check --iters 1 --warmup 0 --inject-fault 1:" + std::to_string(op) + ":skip", 240);
    EXPECT_EQ(r.exit_code, 1) << op << r.out << r.err;
    EXPECT_THAT(r.out, ::testing::ContainsRegex(what)) << op << r.out;
  }
}

TEST_F(RuntimeRun, TensorParallelLayersRunForTiming) {
  const std::string s = schedule("layer-tp", "--set scope=layer --set parallel.tp=2");
  const Shell r = run(4, "--schedule '" + s + "' --iters 1 --warmup 0");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_refused(run(4, "--schedule '" + s + "' --check"), "needs tp = 1");
}

// Bad input: one line from rank 0, exit 2 on every rank, nothing computed.
void expect_refused(const Shell& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("ringmaster-run: error: "));
  EXPECT_THAT(r.err, HasSubstr(what));
  size_t lines = 0;
  for (size_t at = 0; (at = r.err.find("ringmaster-run: error:", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 1u) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("iterations")));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("check against")));
}

TEST_F(RuntimeRun, RefusesAMissingFile) {
  expect_refused(run(2, "--schedule nowhere.json"), "nowhere.json");
}

TEST_F(RuntimeRun, RefusesARankCountMismatch) {
  const std::string s = schedule("np", "");
  expect_refused(run(3, "--schedule '" + s + "'"), "the Schedule has 2 ranks but 3 processes were started");
}

TEST_F(RuntimeRun, RefusesAnotherScheduleVersion) {
  const std::string s = schedule("v", "");
  const std::string v3 = dir() + "/v3.json";
  sh("zcat '" + s + "' | sed 's/\"version\": *2/\"version\": 3/' > '" + v3 + "'");
  expect_refused(run(2, "--schedule '" + v3 + "'"), "version");
}

TEST_F(RuntimeRun, RefusesBuffersThatDoNotFit) {
  // 1.4 GB of buffers per rank; the Schedule itself (~0.1 GB) fits in 0.2.
  const std::string s = schedule("mem", "--set workload.seq_len=256k");
  expect_refused(run(2, "--schedule '" + s + "' --max-memory 0.2"), "rank 0 needs 1.41 GB for its buffers; --max-memory allows 0.20 GB");
}

// Issue 41: every rank holds the whole Schedule; the file's op count is checked
// against what a rank may use before its ops are allocated (the estimate of
// `simulate --schedule`, schedule::estimate_schedule_footprint).
TEST_F(RuntimeRun, RefusesAScheduleTooLargeToHoldBeforeAllocatingItsOps) {
  const std::string s = schedule("hold", "");
  expect_refused(run(2, "--schedule '" + s + "' --max-memory 0.05"),
                 s + ": this Schedule needs ~0.10 GB on every rank to hold its 28 ops; --max-memory allows 0.05 GB");
}

// Issue 41: a Q buffer of another shape than its attention's tokens x heads was
// refused by Layouts without the file, hinting at all-to-alls; validate() names both.
TEST_F(RuntimeRun, RefusesABufferShapeItsAttentionDoesNotHold) {
  nlohmann::json j = load(schedule("shape", ""));
  j["buffers"]["shape"][0] = {1, 1 << 20, 1 << 20, 64};
  const std::string path = dir() + "/shape.json";
  std::ofstream(path) << j.dump();
  expect_refused(run(2, "--schedule '" + path + "'"),
                 path + ": op 4 (rank 0 stream 'compute', attn_fwd forward layer 0 step 0): buffer 0 'q' has shape "
                        "[1, 1048576, 1048576, 64], 70368744177664 elements, but as its q it needs batch 1 x 1024 query tokens");
}

TEST_F(RuntimeRun, RefusesCheckOnAScopeItCannotCompare) {
  const std::string s = schedule("step-tp", "--set scope=step --set parallel.tp=2 --set workload.seq_len=512");
  expect_refused(run(4, "--schedule '" + s + "' --check"), "--check of the step scope needs tp = 1");
}

TEST_F(RuntimeRun, RefusesAnIndexBuiltOnStripedKeys) {
  // parallel.shuffle = once: the index building would read the ring's striped
  // keys, where MTraining builds on the contiguous layout.
  const std::string s = schedule("dynamic_once", "--set workload.pattern=tiny-dynamic-vs --set kernel.attention=block_sparse "
                                                 "--set workload.seq_len=4096 --set parallel.partition=stripe");
  expect_refused(run(2, "--schedule '" + s + "'"), "not one contiguous run");
}

// The carried experiment sizes everything a rank allocates: the runtime runs the
// checks `simulate --schedule` runs (schedule::check_carried_experiment) before any
// rank starts, so an edited one is refused at once, naming the file and the field
// (before, seq_len 2^32+4096 ran into std::bad_alloc after up to 71 s, and 2^31
// into a tile error after ops had run).
TEST_F(RuntimeRun, RefusesACarriedExperimentThatDoesNotDescribeItsOps) {
  const std::string s = schedule("carried", "");
  const nlohmann::json base = load(s);
  auto edited = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = base;
    edit(j);
    const std::string path = dir() + "/" + name + ".json";
    std::ofstream(path) << j.dump();
    return path;
  };
  for (const int64_t seq_len : {(int64_t(1) << 32) + 4096, int64_t(1) << 31}) {
    const std::string path = edited("seq" + std::to_string(seq_len), [&](nlohmann::json& j) {
      j["experiment"]["workload"]["seq_len"] = seq_len;
    });
    const Shell r = run(2, "--schedule '" + path + "' --check");
    expect_refused(r, path + ": the Schedule's token sets cover tokens 0..2047, but its experiment's $.workload.seq_len is " +
                          std::to_string(seq_len));
    EXPECT_LT(r.seconds, 30) << seq_len;
  }
  expect_refused(run(2, "--schedule '" + edited("gpu", [](nlohmann::json& j) { j["ranks"][1]["gpu"] = 9; }) + "'"),
                 "ranks[1].gpu: GPU 9 is outside cluster cpu-test (GPUs 0..3)");
  expect_refused(run(2, "--schedule '" + edited("two-on-one", [](nlohmann::json& j) { j["ranks"][1]["gpu"] = j["ranks"][0]["gpu"]; }) + "'"),
                 "already holds rank 0 (expected one rank per GPU)");
  expect_refused(run(2, "--schedule '" + edited("world", [](nlohmann::json& j) { j["experiment"]["parallel"]["dp"] = 2; }) + "'"),
                 "the Schedule has 2 ranks, its experiment dp*tp*hp*cp = 2*1*1*2 = 4");
  expect_refused(run(2, "--schedule '" + edited("pattern", [](nlohmann::json& j) {
                   j["experiment"]["workload"]["pattern"] = "no-such-pattern";
                 }) + "'"),
                 "no-such-pattern");
}

// Issue 41: `ringmaster schedule --set model=llama3-8b --set workload.seq_len=4k
// --set scope=attention_fwd --set parallel.cp=4 --set parallel.partition=zigzag`
// (the default top-p pattern, per-call shuffle) made a Schedule every rank refused
// at its index building ("its keys (kv.seq) are not one contiguous run"): a swap
// within the pairs (c, cp-1-c) cannot turn contiguous shards into zigzag's chunks
// at cp > 2, so no contiguous layout precedes the shuffle. The exporters refuse it,
// naming the key; simulations of it are unchanged (tests/tools/golden_predictions.json).
TEST_F(RuntimeRun, TheExportRefusesAZigzagShuffleTheIndexCannotPrecede) {
  const std::string path = dir() + "/zigzag4.json";
  const Shell r = sh("cd '" + dir() + "' && '" RINGMASTER_BIN "' schedule tiny.json --set workload.pattern=tiny-topp-vs "
                     "--set kernel.attention=block_sparse --set workload.seq_len=4096 --set parallel.shuffle=per_call "
                     "--set parallel.cp=4 -o '" + path + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("tiny.json: $.parallel.partition: zigzag with the per-call shuffle and a dynamic pattern "
                               "cannot be executed at cp = 4"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path));
  // The same experiment still simulates (its costs do not depend on the layout).
  const Shell sim = sh("cd '" + dir() + "' && '" RINGMASTER_BIN "' simulate tiny.json --set workload.pattern=tiny-topp-vs "
                       "--set kernel.attention=block_sparse --set workload.seq_len=4096 --set parallel.shuffle=per_call "
                       "--set parallel.cp=4 --json");
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
}

TEST_F(RuntimeRun, RefusesABadFaultSpec) {
  const std::string s = schedule("fault-spec", "");
  expect_refused(run(2, "--schedule '" + s + "' --inject-fault 1:0:explode"), "--inject-fault");
}

// Faults: every rank ends, non-zero, within 30 s, and the output names the rank.
TEST_F(RuntimeRun, AFailingOpEndsEveryRank) {
  const std::string s = schedule("fail", "");
  const Shell r = run(2, "--schedule '" + s + "' --iters 3 --inject-fault 1:5:fail", 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_THAT(r.err, HasSubstr("rank 1: op 5 (rank 1"));
  EXPECT_THAT(r.err, HasSubstr("injected fault"));
}

TEST_F(RuntimeRun, AHangingRankIsNamedByTheOthers) {
  const std::string s = schedule("hang", "");
  const Shell r = run(2, "--schedule '" + s + "' --iters 3 --stall-timeout 5 --inject-fault 1:5:hang", 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "timed out";
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_THAT(r.err, HasSubstr("rank 0: no progress for 5 s"));
  EXPECT_THAT(r.err, HasSubstr("(peer rank 1)"));
}

TEST_F(RuntimeRun, AKilledRankEndsTheRun) {
  const std::string s = schedule("kill", "");
  // mpirun forks the ranks itself: kill one of its children mid-run.
  const std::string script = dir() + "/kill.sh";
  std::ofstream(script) << "cd '" << dir() << "'\n"
                        << kMpirun << " -np 2 '" RINGMASTER_RUN_BIN "' --schedule '" << s << "' --iters 100000 --warmup 0 &\n"
                        << "MP=$!; sleep 3; kill -9 $(pgrep -P $MP | head -1)\n"
                        << "start=$(date +%s); wait $MP; rc=$?; end=$(date +%s)\n"
                        << "echo \"rc=$rc after=$((end - start))\"\n";
  const Shell r = sh("timeout 90 bash '" + script + "'");
  ASSERT_THAT(r.out, HasSubstr("rc=")) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("rc=0 "))) << r.out;
  const double after = std::stod(r.out.substr(r.out.find("after=") + 6));
  EXPECT_LT(after, 30.0) << r.out;
  EXPECT_THAT(r.err, ::testing::ContainsRegex("rank [01]")) << r.err;
}

}  // namespace
