// Ops per wall second of each engine on a synthetic ring schedule (compute
// overlapped with a neighbour exchange, 3 ops per rank and step) on the
// a100-40g-4x8-hdr cluster, and of the run driver alone (a zero-time backend,
// as the deadlock check runs it). items_per_second is ops/s.
//   build-engine/bin/bench_engines
#include <benchmark/benchmark.h>

#include "sim/config/config_store.hpp"
#include "sim/engine/analytic.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/run_driver.hpp"
#include "tests/support/synthetic_schedules.hpp"

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

}  // namespace

BENCHMARK_MAIN();
