#include "tests/support/synthetic_schedules.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <random>

#include "sim/schedule/builder.hpp"

namespace rm::engine {

using schedule::OpId;
using schedule::OpKind;
using schedule::ScheduleBuilder;
using schedule::StreamKind;

schedule::Schedule ring_schedule(const RingSpec& spec) {
  ScheduleBuilder b(nlohmann::json::object(), "synthetic_ring");
  const int n = spec.ranks;
  for (int r = 0; r < n; ++r) {
    b.add_rank(spec.first_gpu + r);
    b.add_stream(r, StreamKind::compute, "compute");
    b.add_stream(r, StreamKind::comm_intra, "comm");
  }
  int world = -1;
  if (spec.all_reduce_every > 0) {
    std::vector<int> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    world = b.add_group(all, "world");
  }
  // compute ops every step, a send and a receive per rank on all but the last
  const int collectives = spec.all_reduce_every > 0 ? (spec.steps - 1) / spec.all_reduce_every : 0;
  b.reserve_ops(size_t(n) * (3 * size_t(spec.steps) - 2) + size_t(n) * size_t(collectives));
  std::vector<OpId> last_recv(static_cast<size_t>(n), -1);
  for (int k = 0; k < spec.steps; ++k) {
    std::vector<OpId> recv(static_cast<size_t>(n), -1), send(static_cast<size_t>(n), -1);
    for (int r = 0; r < n; ++r) {
      std::vector<OpId> deps;
      if (last_recv[size_t(r)] >= 0) deps.push_back(last_recv[size_t(r)]);
      b.compute(r, 0, OpKind::attn_fwd, {schedule::Phase::forward, 0, k}, {spec.flops, 0, 0}, deps);
    }
    if (k + 1 == spec.steps) break;
    for (int r = 0; r < n; ++r) {
      auto ids = b.p2p({r, 1, (r + 1) % n, 1, spec.bytes, {schedule::Phase::forward, 0, k}, k});
      send[size_t(r)] = ids.send;
      recv[size_t((r + 1) % n)] = ids.recv;
    }
    for (int r = 0; r < n; ++r) {
      // one launch per rank and step: its send and its receive (stream order = id order)
      std::array<OpId, 2> pair{std::min(send[size_t(r)], recv[size_t(r)]), std::max(send[size_t(r)], recv[size_t(r)])};
      b.launch_together(pair);
      if (last_recv[size_t(r)] >= 0) {
        b.add_dep(send[size_t(r)], last_recv[size_t(r)]);
        b.add_dep(recv[size_t(r)], last_recv[size_t(r)]);
      }
    }
    last_recv = recv;
    if (world >= 0 && (k + 1) % spec.all_reduce_every == 0)
      b.collective(world, OpKind::all_reduce, spec.bytes, {schedule::Phase::forward, 0, k}, StreamKind::comm_intra, k);
  }
  return std::move(b).build();
}

schedule::Schedule random_schedule(const RandomSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ScheduleBuilder b(nlohmann::json::object(), "synthetic_random");
  const int n = spec.ranks;
  for (int r = 0; r < n; ++r) {
    b.add_rank(r);
    b.add_stream(r, StreamKind::compute, "compute");
    b.add_stream(r, StreamKind::comm_intra, "comm");
    b.add_stream(r, StreamKind::comm_inter, "comm2");
  }
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  const int world = b.add_group(all, "world");
  std::vector<int> evens, odds;
  for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
  const int even_group = b.add_group(evens, "evens");
  const int odd_group = b.add_group(odds, "odds");
  std::vector<std::vector<OpId>> on_rank(static_cast<size_t>(n));
  auto some_deps = [&](int r) {
    std::vector<OpId> deps;
    const auto& mine = on_rank[size_t(r)];
    for (int i = 0, k = uniform(0, 2); i < k && !mine.empty(); ++i)
      deps.push_back(mine[size_t(uniform(0, int(mine.size()) - 1))]);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    return deps;
  };
  const OpKind compute_kinds[] = {OpKind::attn_fwd, OpKind::attn_bwd, OpKind::gemm, OpKind::elementwise};
  const OpKind collective_kinds[] = {OpKind::all_reduce, OpKind::all_gather, OpKind::reduce_scatter,
                                     OpKind::all_to_all, OpKind::broadcast};
  int64_t tag = 0;
  while (int(b.peek().ops.size()) < spec.ops) {
    const int what = uniform(0, 9);
    const int64_t bytes = int64_t(uniform(1, 64)) << 16;  // 64 KiB..4 MiB: broadcasts of at most 8 chunks
    if (what < 5) {
      const int r = uniform(0, n - 1);
      const OpKind k = compute_kinds[uniform(0, 3)];
      const schedule::ComputeCost cost{double(uniform(1, 100)) * 1e10, k == OpKind::attn_fwd ? uniform(0, 1) * 1000 : 0,
                                       0};
      on_rank[size_t(r)].push_back(b.compute(r, 0, k, {}, cost, some_deps(r)));
    } else if (what < 8) {
      const int a = uniform(0, n - 1);
      const int c = (a + uniform(1, n - 1)) % n;
      const int stream = uniform(1, 2);
      const auto da = some_deps(a), dc = some_deps(c);
      auto ids = b.p2p({a, stream, c, stream, bytes, {}, tag++});
      b.add_deps(ids.send, da);
      b.add_deps(ids.recv, dc);
      on_rank[size_t(a)].push_back(ids.send);
      on_rank[size_t(c)].push_back(ids.recv);
      if (what == 7) {  // and straight back, launched together with the first leg
        auto back = b.p2p({c, stream, a, stream, bytes, {}, tag++});
        std::array<OpId, 2> on_a{ids.send, back.recv}, on_c{ids.recv, back.send};
        b.launch_together(on_a);
        b.launch_together(on_c);
        on_rank[size_t(a)].push_back(back.recv);
        on_rank[size_t(c)].push_back(back.send);
      }
    } else {
      const int g = std::array<int, 3>{world, even_group, odd_group}[size_t(uniform(0, 2))];
      const OpKind k = collective_kinds[uniform(0, 4)];
      const auto& members = b.peek().groups[size_t(g)].ranks;
      const int root = members[size_t(uniform(0, int(members.size()) - 1))];
      std::vector<std::vector<OpId>> deps;
      for (int r : members) deps.push_back(some_deps(r));
      const auto ids = b.collective(g, k, bytes, {}, what == 8 ? StreamKind::comm_intra : StreamKind::comm_inter,
                                    tag++, root);
      for (size_t i = 0; i < ids.size(); ++i) {
        b.add_deps(ids[i], deps[i]);
        on_rank[size_t(members[i])].push_back(ids[i]);
      }
    }
  }
  return std::move(b).build();
}

}  // namespace rm::engine
