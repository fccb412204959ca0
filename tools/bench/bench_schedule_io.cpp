// Schedule file size and I/O speed at full scale: a synthetic training step
// shaped like the default experiment (36 layers, 32 ranks on 4 nodes of 8,
// hierarchical ring of 32 steps; forward, full recomputation, backward), with
// per-layer, per-rank, per-step sparse costs, and the data descriptors of
// format v2 (buffers, accesses, attention and GEMM details). Target: well
// under 50 MB, load (parse + validate) under 2 s.
//   build/bin/bench_schedule_io --benchmark_counters_tabular=true
#include <filesystem>
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/schedule/topo_order.hpp"
#include "sim/schedule/validate.hpp"

namespace {

using namespace rm::schedule;

constexpr int kLayers = 36, kNodes = 4, kGpusPerNode = 8, kRanks = kNodes * kGpusPerNode;
constexpr int64_t kTokens = 16384, kHeads = 16, kKvHeads = 2, kDim = 128;

// Per rank: Q, K|V, O, LSE, two K|V slots, a dK|dV partial and slot, an activation and weights.
struct Bufs {
  int q, kv, o, lse, slot[2], dkv_part, dkv_slot[2], act, weights;
  int tokens;  // the rank's token set
};
std::vector<Bufs> bufs;

void declare_buffers(ScheduleBuilder& b) {
  for (int r = 0; r < kRanks; ++r) {
    Bufs x;
    const std::vector<int64_t> q{1, kTokens, kHeads, kDim}, kv{2, 1, kTokens, kKvHeads, kDim};
    x.q = b.add_buffer(r, "q", BufferRole::q, DType::bf16, q, Instances::per_layer);
    x.kv = b.add_buffer(r, "kv", BufferRole::kv, DType::bf16, kv, Instances::per_layer);
    x.o = b.add_buffer(r, "o", BufferRole::o, DType::bf16, q, Instances::per_layer);
    x.lse = b.add_buffer(r, "lse", BufferRole::lse, DType::fp32, {1, kHeads, kTokens}, Instances::per_layer);
    for (int i = 0; i < 2; ++i) {
      x.slot[i] = b.add_buffer(r, "kv.inner" + std::to_string(i), BufferRole::kv_slot, DType::bf16, kv);
      x.dkv_slot[i] = b.add_buffer(r, "dkv.inner" + std::to_string(i), BufferRole::dkv_slot, DType::bf16, kv);
    }
    x.dkv_part = b.add_buffer(r, "dkv.step", BufferRole::dkv_slot, DType::bf16, kv);
    x.act = b.add_buffer(r, "act", BufferRole::activation, DType::bf16, {kTokens, 2048}, Instances::per_layer);
    x.weights = b.add_buffer(r, "weights", BufferRole::weight, DType::bf16, {1 << 20}, Instances::per_layer);
    x.tokens = b.token_set({{{int64_t{r} * 128, 128, 128 * kRanks, kTokens / 128}}});  // a stripe partition
    bufs.push_back(x);
  }
}

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
      const Bufs& x = bufs[ur];
      const int kv = step == 0 ? x.kv : x.slot[(step - 1) % 2];
      if (bwd) b.set_access(computed[ur], {x.q, kv, x.o, x.lse}, {x.dkv_part});
      else b.set_access(computed[ur], {x.q, kv}, {x.o, x.lse});
      const int src = (r - step + kRanks) % kRanks;
      b.set_attention(computed[ur], {x.tokens, bufs[static_cast<size_t>(src)].tokens, 0, int(kHeads), 0, int(kKvHeads),
                                     Mask::causal, IndexSource::built, step > 0});
    }
    for (int round = 0; round < (bwd ? 2 : 1); ++round) {  // backward: K/V, then dK/dV (tag 1)
      std::vector<OpId> recv_on(kRanks);
      std::vector<OpId> send_on(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        int node = r / kGpusPerNode, local = r % kGpusPerNode;
        int to = outer ? ((node + 1) % kNodes) * kGpusPerNode + local : node * kGpusPerNode + (local + 1) % kGpusPerNode;
        int st = outer ? 2 : 1;
        auto ids = b.p2p({r, st, to, st, int64_t{2} * kTokens * kKvHeads * kDim * 2, w, round});
        b.add_dep(ids.send, computed[static_cast<size_t>(r)]);
        const Bufs& from = bufs[static_cast<size_t>(r)];
        const Bufs& into = bufs[static_cast<size_t>(to)];
        b.set_access(ids.send, {round == 0 ? (step == 0 ? from.kv : from.slot[(step - 1) % 2]) : from.dkv_part}, {});
        b.set_access(ids.recv, {}, {round == 0 ? into.slot[step % 2] : into.dkv_slot[step % 2]});
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
    for (OpKind k : {OpKind::elementwise, OpKind::gemm, OpKind::index_build}) {
      const OpId id = b.compute(r, 0, k, {phase, layer, -1}, {3.2e11, 0, 16384}, {last[static_cast<size_t>(r)]});
      const Bufs& x = bufs[static_cast<size_t>(r)];
      b.set_access(id, {x.act, x.weights}, {x.act});
      if (k == OpKind::gemm) b.set_gemm(id, {kTokens, 2048, 2048});
      last[static_cast<size_t>(r)] = id;
    }
}

Schedule full_step() {
  ScheduleBuilder b({{"name", "bench"}, {"parallel", {{"cp", kRanks}, {"ring", "hierarchical"}}}}, "bench_synthetic");
  for (int r = 0; r < kRanks; ++r) {
    b.add_rank(r);
    b.add_stream(r, StreamKind::compute);
    b.add_stream(r, StreamKind::comm_intra);
    b.add_stream(r, StreamKind::comm_inter);
  }
  declare_buffers(b);
  std::mt19937 rng(42);
  std::vector<OpId> last(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    last[static_cast<size_t>(r)] = b.compute(r, 0, OpKind::gemm, {Phase::forward, -1, -1}, {1e9, 0, 16384});
    b.set_access(last[static_cast<size_t>(r)], {bufs[static_cast<size_t>(r)].weights}, {bufs[static_cast<size_t>(r)].act});
    b.set_gemm(last[static_cast<size_t>(r)], {kTokens, 2048, 2048});
  }
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
