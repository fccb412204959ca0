// Schedule file size and I/O speed at full scale: a synthetic training step
// shaped like the default experiment (36 layers, 32 ranks on 4 nodes of 8,
// hierarchical ring of 32 steps; forward, full recomputation, backward), with
// per-layer, per-rank, per-step sparse costs. Target: well under 50 MB, load
// (parse + validate) under 2 s.
//   build/bin/bench_schedule_io --benchmark_counters_tabular=true
#include <filesystem>
#include <random>

#include <benchmark/benchmark.h>

#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/topo_order.hpp"
#include "sim/schedule/validate.hpp"

namespace {

using namespace rm::schedule;

constexpr int kLayers = 36, kNodes = 4, kGpusPerNode = 8, kRanks = kNodes * kGpusPerNode;

// One ring step's compute with a KV rotation: inner steps stay in the node,
// every 8th step crosses nodes. Backward rotates dK/dV as well.
void ring_phase(ScheduleBuilder& b, Phase phase, int layer, std::mt19937& rng, std::vector<OpId>& last) {
  const bool bwd = phase == Phase::backward;
  for (int step = 0; step < kRanks; ++step) {
    const bool outer = step % kGpusPerNode == kGpusPerNode - 1;
    const Where w{phase, layer, step};
    std::vector<OpId> computed(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      int64_t blocks = 200 + static_cast<int64_t>(rng() % 800);
      auto ur = static_cast<size_t>(r);
      computed[ur] = b.compute(r, 0, bwd ? OpKind::attn_bwd : OpKind::attn_fwd, w,
                               {static_cast<double>(blocks) * 128 * 64 * 128 * 4 * (bwd ? 2.5 : 1.0), blocks, 16384},
                               {last[ur]});
      last[ur] = computed[ur];
    }
    for (int round = 0; round < (bwd ? 2 : 1); ++round) {  // backward: K/V, then dK/dV (tag 1)
      std::vector<OpId> recv_on(kRanks);
      std::vector<OpId> send_on(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        int node = r / kGpusPerNode, local = r % kGpusPerNode;
        int to = outer ? ((node + 1) % kNodes) * kGpusPerNode + local : node * kGpusPerNode + (local + 1) % kGpusPerNode;
        int st = outer ? 2 : 1;
        auto ids = b.p2p({r, st, to, st, int64_t{2} * 16384 * 2 * 128 * 2, w, round});
        b.add_dep(ids.send, computed[static_cast<size_t>(r)]);
        send_on[static_cast<size_t>(r)] = ids.send;
        recv_on[static_cast<size_t>(to)] = ids.recv;
      }
      for (int r = 0; r < kRanks; ++r) {
        std::vector<OpId> both{send_on[static_cast<size_t>(r)], recv_on[static_cast<size_t>(r)]};
        b.launch_together(both);  // like batch_isend_irecv
        last[static_cast<size_t>(r)] = recv_on[static_cast<size_t>(r)];
      }
    }
  }
}

void dense_part(ScheduleBuilder& b, Phase phase, int layer, std::vector<OpId>& last) {
  for (int r = 0; r < kRanks; ++r)
    for (OpKind k : {OpKind::elementwise, OpKind::gemm, OpKind::index_build})
      last[static_cast<size_t>(r)] = b.compute(r, 0, k, {phase, layer, -1}, {3.2e11, 0, 16384}, {last[static_cast<size_t>(r)]});
}

Schedule full_step() {
  ScheduleBuilder b({{"name", "bench"}, {"parallel", {{"cp", kRanks}, {"ring", "hierarchical"}}}}, "bench_synthetic");
  for (int r = 0; r < kRanks; ++r) {
    b.add_rank(r);
    b.add_stream(r, StreamKind::compute);
    b.add_stream(r, StreamKind::comm_intra);
    b.add_stream(r, StreamKind::comm_inter);
  }
  std::mt19937 rng(42);
  std::vector<OpId> last(kRanks);
  for (int r = 0; r < kRanks; ++r) last[static_cast<size_t>(r)] = b.compute(r, 0, OpKind::gemm, {Phase::forward, -1, -1}, {1e9, 0, 16384});
  for (int l = 0; l < kLayers; ++l) {
    dense_part(b, Phase::forward, l, last);
    ring_phase(b, Phase::forward, l, rng, last);
  }
  for (int l = kLayers - 1; l >= 0; --l) {
    dense_part(b, Phase::recompute, l, last);
    ring_phase(b, Phase::recompute, l, rng, last);
    ring_phase(b, Phase::backward, l, rng, last);
    dense_part(b, Phase::backward, l, last);
  }
  return std::move(b).build();
}

const Schedule& schedule() {
  static const Schedule s = full_step();
  return s;
}

std::string path_for(bool gz) {
  return (std::filesystem::temp_directory_path() / (gz ? "bench_schedule.json.gz" : "bench_schedule.json")).string();
}

void BM_WriteSchedule(benchmark::State& state) {
  const bool gz = state.range(0) != 0;
  for (auto _ : state) write_schedule(schedule(), path_for(gz));
  state.counters["ops"] = static_cast<double>(schedule().ops.size());
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path_for(gz))) / 1e6;
  state.SetLabel(gz ? "gzip" : "plain");
}

void BM_ReadSchedule(benchmark::State& state) {
  const bool gz = state.range(0) != 0;
  write_schedule(schedule(), path_for(gz));
  for (auto _ : state) benchmark::DoNotOptimize(read_schedule(path_for(gz)));  // parse + validate
  state.counters["ops"] = static_cast<double>(schedule().ops.size());
  state.SetLabel(gz ? "gzip" : "plain");
}

void BM_Validate(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(check(schedule()));
  state.counters["ops"] = static_cast<double>(schedule().ops.size());
}

void BM_TopologicalOrder(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(topological_order(schedule()));
  state.counters["ops"] = static_cast<double>(schedule().ops.size());
}

BENCHMARK(BM_WriteSchedule)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_ReadSchedule)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_Validate)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_TopologicalOrder)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
