#include "sim/generate/step_context.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace rm::generate {

using schedule::OpKind;
using schedule::StreamKind;

StepContext::StepContext(const Experiment& experiment, const sparsity::SparsityModel& patterns, const topology::Topology& topology,
                         placement::WorkCache* cache, bool one_replica)
    : e(experiment),
      topo(topology),
      sim_dp(one_replica ? 1 : experiment.parallel.dp),
      sim_world(one_replica ? experiment.parallel.world() / experiment.parallel.dp : experiment.parallel.world()),
      patterns_dynamic(patterns.dynamic()),
      patterns_sparse(patterns.sparse()),
      patterns_causal(patterns.causal()),
      map(experiment.parallel),
      kind(make_attention_kind(experiment)),
      work(experiment, patterns, cache),
      b(experiment.resolved, generator_name(experiment)),
      memo(experiment.parallel.world()) {
  const Parallel& p = e.parallel;
  coord.resize(size_t(p.world()));
  for (int d = 0; d < p.dp; ++d)
    for (int h = 0; h < p.hp; ++h)
      for (int c = 0; c < p.cp; ++c)
        for (int t = 0; t < p.tp; ++t) coord[size_t(rank(d, h, c, t))] = {d, h, c, t};
  for (int r = 0; r < sim_world; ++r) b.add_rank(r);
  if (one_replica) b.set_symmetry({p.dp, sim_world});

  auto crosses = [&](int r, const std::vector<int>& peers) {
    for (int q : peers)
      if (!topo.same_node(r, q)) return true;
    return false;
  };
  // Group names carry t only with tp > 1, so that tp = 1 schedules are what they were.
  auto suffix = [&](int t) { return p.tp > 1 ? fmt::format("t{}", t) : std::string(); };
  for (int d = 0; d < sim_dp; ++d)
    for (int h = 0; h < p.hp; ++h)
      for (int t = 0; t < p.tp; ++t) {
        auto gpus = map.context_group(d, h, t);
        layouts.push_back(kind->layout(gpus, topo));
        context_groups.push_back(b.add_group(gpus, fmt::format("cp_d{}h{}{}", d, h, suffix(t))));
        shuffle_groups.emplace_back();
        if (shuffle() == Shuffle::stripe) shuffle_groups.back().push_back(context_groups.back());
        if (shuffle() == Shuffle::zigzag)
          for (int c = 0; c <= (p.cp - 1) / 2; ++c) {
            std::vector<int> pair{gpus[size_t(c)]};
            if (p.cp - 1 - c != c) pair.push_back(gpus[size_t(p.cp - 1 - c)]);
            shuffle_groups.back().push_back(b.add_group(pair, fmt::format("zz_d{}h{}c{}{}", d, h, c, suffix(t))));
          }
      }
  for (int d = 0; d < sim_dp; ++d)
    for (int c = 0; c < p.cp; ++c)
      for (int t = 0; t < p.tp; ++t)
        head_groups.push_back(b.add_group(map.head_group(d, c, t), fmt::format("hp_d{}c{}{}", d, c, suffix(t))));
  if (p.tp > 1)
    for (int d = 0; d < sim_dp; ++d)
      for (int h = 0; h < p.hp; ++h)
        for (int c = 0; c < p.cp; ++c)
          tensor_groups.push_back(b.add_group(map.tensor_group(d, h, c), fmt::format("tp_d{}h{}c{}", d, h, c)));
  std::vector<int> all(size_t(p.world()));
  for (int r = 0; r < p.world(); ++r) all[size_t(r)] = r;
  for (int t = 0; t < p.tp; ++t) {
    std::vector<int> replicas;
    for (int r = 0; r < sim_world; ++r)
      if (coord[size_t(r)].t == t) replicas.push_back(r);
    replica_groups.push_back(b.add_group(replicas, p.tp > 1 ? fmt::format("replicas_t{}", t) : "world"));
    if (one_replica) b.set_spans_replicas(replica_groups.back());
  }

  const bool exchange = p.hp > 1 || (p.cp > 1 && (shuffles() || patterns.dynamic()));
  const bool dp = e.scope == Scope::step && p.replicas() > 1;
  streams.resize(size_t(sim_world));
  for (int r = 0; r < sim_world; ++r) {
    const Coord& x = coord[size_t(r)];
    const RingLayout& l = layout(x.d, x.h, x.t);
    RankStreams& s = streams[size_t(r)];
    auto kind_of = [&](const std::vector<int>& peers) {
      return crosses(r, peers) ? StreamKind::comm_inter : StreamKind::comm_intra;
    };
    s.compute = b.add_stream(r, StreamKind::compute, "compute");
    if (exchange) {
      std::vector<int> peers = map.head_group(x.d, x.c, x.t);
      if (p.cp > 1 && (shuffles() || patterns.dynamic())) {
        auto cg = map.context_group(x.d, x.h, x.t);
        peers.insert(peers.end(), cg.begin(), cg.end());
      }
      s.exchange = b.add_stream(r, kind_of(peers), "exchange");
    }
    // Position of this rank's context rank in the layout, and its ring neighbours' GPUs.
    for (int o = 0; o < l.outer(); ++o)
      for (int i = 0; i < l.inner(); ++i) {
        if (l.rings[size_t(o)][size_t(i)] != x.c) continue;
        auto gpu_at = [&](int oo, int ii) {
          return rank(x.d, x.h, l.rings[size_t((oo + l.outer()) % l.outer())][size_t((ii + l.inner()) % l.inner())],
                      x.t);
        };
        if (l.inner() > 1) {
          const StreamKind k = kind_of({gpu_at(o, i - 1), gpu_at(o, i + 1)});
          s.kv_inner = b.add_stream(r, k, "kv_inner");
          if (has_backward()) s.dkv_inner = b.add_stream(r, k, "dkv_inner");
        }
        if (l.outer() > 1) {
          const StreamKind k = kind_of({gpu_at(o - 1, i), gpu_at(o + 1, i)});
          s.kv_outer = b.add_stream(r, k, "kv_outer");
          if (has_backward()) s.dkv_outer = b.add_stream(r, k, "dkv_outer");
        }
      }
    if (dp) {
      std::vector<int> replicas;  // the rank's replica group
      for (int q : all)
        if (coord[size_t(q)].t == x.t) replicas.push_back(q);
      s.dp = b.add_stream(r, kind_of(replicas), "dp");
    }
    if (p.tp > 1) s.tp = b.add_stream(r, kind_of(map.tensor_group(x.d, x.h, x.c)), "tp");
  }
}

StepContext::Shuffle StepContext::shuffle_of(const Parallel& p) {
  if (p.cp == 1 || p.shuffle == ShuffleMode::once) return Shuffle::none;
  switch (p.partition) {
    case Partition::stripe:
    case Partition::balanced: return Shuffle::stripe;
    case Partition::zigzag: return Shuffle::zigzag;
    case Partition::contiguous: break;
  }
  return Shuffle::none;
}

std::vector<OpId> StepContext::collective(int group, OpKind k, int64_t bytes, schedule::Where where,
                                          int RankStreams::*which, RankDeps& ready, int64_t tag, int root) {
  auto ids = b.collective(
      group, k, bytes, where, [&](int r) { return streams[size_t(r)].*which; },
      [&](int r) { return ready[size_t(r)]; }, tag, root);
  const auto& members = b.peek().groups[size_t(group)].ranks;
  for (size_t i = 0; i < members.size(); ++i) ready[size_t(members[i])] = {ids[i]};
  return ids;
}

int StepContext::buffer(int rank, const std::string& name, schedule::BufferRole role, schedule::DType dtype,
                        std::vector<int64_t> shape, schedule::Instances instances) {
  auto [it, fresh] = buffer_ids_.try_emplace({rank, name}, -1);
  if (fresh) {
    it->second = b.add_buffer(rank, name, role, dtype, std::move(shape), instances);
    return it->second;
  }
  const schedule::Buffer& have = b.peek().buffers[size_t(it->second)];
  if (have.role != role || have.dtype != dtype || have.shape != shape || have.instances != instances)
    throw std::logic_error(fmt::format("generator: buffer '{}' on rank {} declared twice, differently", name, rank));
  return it->second;
}

OpId StepContext::compute(int r, OpKind k, schedule::Where where, schedule::ComputeCost cost, RankDeps& ready) {
  OpId id = b.compute(r, streams[size_t(r)].compute, k, where, cost, ready[size_t(r)]);
  ready[size_t(r)] = {id};
  return id;
}

}  // namespace rm::generate
