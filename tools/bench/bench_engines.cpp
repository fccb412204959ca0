// The engines' speed, in one run:
//  1. a scale table (own timing, CPU seconds of this process): the analytic
//     engine's ops/s at ~100K, ~1M and ~10M ops on a synthetic ring (32 ranks,
//     compute + a joined send/recv per step, an all_reduce every 50 steps),
//     op times alone (run plan included) and with the Timeline; bytes per op
//     of those Schedules and of the default experiment's step; and the
//     synthetic 32 x 1,000 point-to-point ring written as a Schedule file and
//     run end to end by `ringmaster simulate --schedule` (user + sys CPU of
//     the child process);
//  2. google-benchmark cases on the a100-40g-4x8-hdr cluster: each engine on
//     the plain ring, and the run driver alone (a zero-time backend, as the
//     deadlock check runs it). items_per_second is ops/s.
//   build/bin/bench_engines [--max-ops N] [--no-scale] [--ring-file PATH] [google-benchmark flags]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/run_driver.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/support/synthetic_schedules.hpp"
#include "tools/cli/allocator_tuning.hpp"

namespace {

using namespace rm;

// kind: an engine, or nullopt for the analytic engine's op times alone (no Timeline).
void run(benchmark::State& state, std::optional<engine::EngineKind> kind) {
  auto cfg = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "bench");
  const Cluster cluster = parse_cluster(JsonReader(cfg.json, cfg.source));
  const topology::Topology topo(cluster);
  const cost::CostModel model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu));
  const auto s = engine::ring_schedule({32, 0, static_cast<int>(state.range(0)), 1e11, 16 << 20});
  for (auto _ : state) {
    if (kind) benchmark::DoNotOptimize(engine::simulate(s, topo, model, *kind));
    else benchmark::DoNotOptimize(engine::run_analytic(s, topo, model));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.ops.size()));
  state.counters["ops"] = static_cast<double>(s.ops.size());
}

// The driver's own cost: plan once, then run with every op ending as it starts.
void BM_RunDriverZeroTime(benchmark::State& state) {
  const auto s = engine::ring_schedule({32, 0, static_cast<int>(state.range(0)), 1e11, 16 << 20});
  const schedule::RunPlan plan(s);
  struct Now final : schedule::RunBackend {
    schedule::RunDriver* d = nullptr;
    void post(schedule::OpId) override {}
    void start_compute(schedule::OpId op) override { d->complete(op); }
    void start_p2p(schedule::OpId op, schedule::OpId partner) override { d->complete(op), d->complete(partner); }
    void start_collective(int64_t) override {}  // the ring has none
  };
  for (auto _ : state) {
    Now now;
    schedule::RunDriver d(plan, now);
    now.d = &d;
    d.start();
    benchmark::DoNotOptimize(d.ops_done());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.ops.size()));
}

void BM_Analytic(benchmark::State& state) { run(state, engine::EngineKind::analytic); }
void BM_AnalyticOpTimes(benchmark::State& state) { run(state, std::nullopt); }
void BM_SimGrid(benchmark::State& state) { run(state, engine::EngineKind::simgrid); }

// 32 ranks x steps: 1000 steps ~ 96K ops, 10000 steps ~ 960K ops. Wall time:
// the SimGrid engine works in a child process.
BENCHMARK(BM_Analytic)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AnalyticOpTimes)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RunDriverZeroTime)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SimGrid)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Heap bytes glibc takes for an allocation of n bytes (its chunk: n + 8 rounded up to 16, at least 32).
size_t chunk(size_t n) { return n == 0 ? 0 : std::max<size_t>(32, (n + 8 + 15) / 16 * 16); }
template <class T>
size_t vec_bytes(const std::vector<T>& v) {
  return chunk(v.capacity() * sizeof(T));
}

// What a Schedule's ops take: the Op array, each op's dependency storage and
// the descriptor tables they index (amortised), not ranks, groups or buffers.
struct OpBytes {
  double ops, deps, tables;
  double total() const { return ops + deps + tables; }
};
OpBytes op_bytes(const schedule::Schedule& s) {
  const auto n = static_cast<double>(s.ops.size());
  size_t deps = 0, tables = vec_bytes(s.accesses) + vec_bytes(s.attentions) + vec_bytes(s.gemms) + vec_bytes(s.token_sets);
  for (const auto& op : s.ops) deps += chunk(op.deps.heap_bytes());
  for (const auto& a : s.accesses) tables += vec_bytes(a.reads) + vec_bytes(a.writes);
  for (const auto& t : s.token_sets) tables += vec_bytes(t.runs);
  return {double(vec_bytes(s.ops)) / n, double(deps) / n, double(tables) / n};
}

engine::RingSpec scale_ring(int steps) { return {32, 0, steps, 1e11, 16 << 20, 50}; }

// Best CPU seconds of `reps` calls of f.
template <class F>
double best_cpu(int reps, F&& f) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const double t0 = cpu_seconds(RUSAGE_SELF);
    f();
    best = std::min(best, cpu_seconds(RUSAGE_SELF) - t0);
  }
  return best;
}

// `ringmaster simulate --schedule path`, output discarded: the child's user + sys CPU seconds.
double simulate_cli_cpu(const std::string& ringmaster, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    execl(ringmaster.c_str(), ringmaster.c_str(), "simulate", "--schedule", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage u{};
  wait4(pid, &status, 0, &u);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void scale_table(const std::string& ringmaster, int64_t max_ops, const std::string& ring_file) {
  auto cfg = ConfigStore().load("clusters", "a100-40g-4x8-hdr", "bench");
  const Cluster cluster = parse_cluster(JsonReader(cfg.json, cfg.source));
  const topology::Topology topo(cluster);
  const cost::CostModel model(cluster, load_attention_kernel(ConfigStore(), "block_sparse", cluster.gpu));
  std::printf("analytic engine, synthetic ring (32 ranks, send/recv per step, all_reduce every 50 steps), CPU s\n");
  std::printf("%10s %10s %12s %12s %12s %12s %9s %9s %9s\n", "ops", "build s", "op times s", "op times/s",
              "+Timeline s", "+Timeline/s", "B/op", "deps B", "table B");
  for (int steps : {1000, 10000, 100000}) {
    if (int64_t(steps) * 97 > max_ops) break;  // ~97 ops per step
    const double t0 = cpu_seconds(RUSAGE_SELF);
    const auto s = engine::ring_schedule(scale_ring(steps));
    const double build = cpu_seconds(RUSAGE_SELF) - t0;
    const auto n = static_cast<double>(s.ops.size());
    const int reps = steps >= 100000 ? 1 : 3;
    const double times = best_cpu(reps, [&] { benchmark::DoNotOptimize(engine::run_analytic(s, topo, model)); });
    const double timeline = best_cpu(reps, [&] {
      benchmark::DoNotOptimize(engine::simulate(s, topo, model, engine::EngineKind::analytic));
    });
    const OpBytes b = op_bytes(s);
    std::printf("%10.0f %10.3f %12.4f %11.2fM %12.4f %11.2fM %9.1f %9.1f %9.1f\n", n, build, times, n / times / 1e6,
                timeline, n / timeline / 1e6, b.total(), b.deps, b.tables);
    std::fflush(stdout);
  }

  rm::pipeline::Session session;
  const Experiment e = load_experiment(ConfigStore{}, "", {});
  const auto step = session.schedule(e);
  const OpBytes b = op_bytes(step);
  std::printf("default step (%zu ops): %.1f bytes/op (Op %zu B: ops %.1f, deps %.1f, tables %.1f)\n", step.ops.size(),
              b.total(), sizeof(schedule::Op), b.ops, b.deps, b.tables);

  // The synthetic point-to-point ring as a file, with the default experiment
  // (whose cluster has the GPUs) so that `simulate --schedule` can load it.
  // 1e12 FLOPs a step, as bench_scale's ring: with 1e11 the step is so short
  // that the experiment's model FLOPs exceed the GPUs' peak and the CLI refuses it.
  auto ring = engine::ring_schedule({32, 0, 1000, 1e12, 16 << 20});
  ring.experiment = step.experiment;
  const std::string path =
      !ring_file.empty() ? ring_file
                         : (std::filesystem::temp_directory_path() / fmt::format("bench_ring_{}.json.gz", getpid())).string();
  schedule::write_schedule(ring, path);
  std::fflush(stdout);  // the child must not inherit (and flush) what is buffered
  double best = 1e300;
  bool failed = false;  // a run that failed has no figure: say so, never print one
  for (int i = 0; i < 3; ++i) {
    const double t = simulate_cli_cpu(ringmaster, path);
    failed = failed || t < 0;
    best = std::min(best, t);
  }
  if (failed)
    std::printf("ring 32 x 1000 (%zu ops): `ringmaster simulate --schedule` FAILED (its error is above)\n",
                ring.ops.size());
  else
    std::printf("ring 32 x 1000 (%zu ops, file %ju bytes): `ringmaster simulate --schedule` %.3f s CPU (best of 3)\n",
                ring.ops.size(), static_cast<uintmax_t>(std::filesystem::file_size(path)), best);
  if (ring_file.empty()) std::filesystem::remove(path);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  rm::cli::back_heap_with_huge_pages(argv);  // as the ringmaster executable runs
  int64_t max_ops = 20'000'000;
  bool scale = true;
  std::string ring_file;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-ops") && i + 1 < argc) max_ops = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-scale")) scale = false;
    else if (!std::strcmp(argv[i], "--ring-file") && i + 1 < argc) ring_file = argv[++i];  // keep the ring's file there
    else rest.push_back(argv[i]);
  }
  if (scale) scale_table((std::filesystem::path(argv[0]).parent_path() / "ringmaster").string(), max_ops, ring_file);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
