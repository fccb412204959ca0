#include "sim/report/imbalance.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "sim/cost/attention_cost.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/placement/context_partition.hpp"
#include "sim/placement/token_partition.hpp"

namespace rm {

namespace {

sparsity::BlockShape shape_of(const Experiment& e) { return {e.workload.block_q, e.workload.block_k}; }

// Heads with identical masks share one pattern object, so costs are cached by it.
using PairCache = std::map<const sparsity::HeadPattern*, std::vector<sparsity::TileCost>>;

// Per-rank-pair costs of one layer, summed over the heads that head rank h holds.
std::vector<sparsity::TileCost> layer_pair_costs(const sparsity::SparsityModel& m, int layer, const HeadShard& hs,
                                                 const std::vector<sparsity::TokenSet>& ranks,
                                                 sparsity::BlockShape shape, PairCache& cache) {
  const size_t W = ranks.size();
  std::vector<sparsity::TileCost> sum(W * W);
  for (int h = hs.first_head; h < hs.first_head + hs.heads; ++h) {
    const auto* pat = &m.head(layer, h);
    auto it = cache.find(pat);
    if (it == cache.end()) it = cache.emplace(pat, sparsity::pair_costs(*pat, ranks, shape)).first;
    const auto& c = it->second;
    for (size_t i = 0; i < W * W; ++i) {
      sum[i].blocks += c[i].blocks;
      sum[i].nnz += c[i].nnz;
    }
  }
  return sum;
}

struct Ratios {
  double worker, step, max_sum, mean_sum, step_max_sum;
};

// work[g][k] -> worker and step ratios (1 when there is no work at all).
Ratios ratios(const std::vector<std::vector<double>>& work) {
  const size_t G = work.size(), K = work[0].size();
  double max_total = 0, sum_total = 0, step_max = 0;
  for (size_t g = 0; g < G; ++g) {
    double t = std::accumulate(work[g].begin(), work[g].end(), 0.0);
    max_total = std::max(max_total, t);
    sum_total += t;
  }
  for (size_t k = 0; k < K; ++k) {
    double mx = 0;
    for (size_t g = 0; g < G; ++g) mx = std::max(mx, work[g][k]);
    step_max += mx;
  }
  const double mean_total = sum_total / double(G);
  if (mean_total <= 0) return {1, 1, 0, 0, 0};
  return {max_total / mean_total, step_max / mean_total, max_total, mean_total, step_max};
}

}  // namespace

ImbalanceReport imbalance_report(const Experiment& e, const sparsity::SparsityModel& m, const Topology& topo,
                                 const std::vector<Partition>& partitions, const Progress& progress) {
  const auto& P = e.parallel;
  const auto shape = shape_of(e);
  ImbalanceReport rep;
  for (int l = 0; l < m.layers(); ++l) rep.block_sparsity += m.block_sparsity(l, shape) / m.layers();

  const DeviceMap dm(P);
  const auto group = dm.context_group(0, 0);
  RingHierarchy hier;
  if (P.ring == RingKind::hierarchical) hier = node_local_rings(group, topo);
  const auto src = ring_sources(P.ring, P.cp, P.window, P.placement == PlacementOrder::interleaved,
                                P.ring == RingKind::hierarchical ? &hier : nullptr);
  const int K = P.cp;

  // Who sends rank r its K/V for step k: the rank that held that block at step k-1.
  std::vector<std::vector<int>> sender(static_cast<size_t>(K), std::vector<int>(size_t(P.cp), -1));
  for (int k = 1; k < K; ++k)
    for (int r = 0; r < P.cp; ++r)
      for (int q = 0; q < P.cp; ++q)
        if (src[size_t(k - 1)][size_t(q)] == src[size_t(k)][size_t(r)]) sender[size_t(k)][size_t(r)] = q;

  const bool sparse = rep.block_sparsity > 0.01;
  const double flops_per_block = cost::attention_fwd_flops_per_block(shape.bq, shape.bk, e.model.head_dim);

  int done = 0;
  const int total_work = int(partitions.size()) * m.layers() * P.hp;
  for (Partition part : partitions) {
    const int64_t S = e.workload.seq_len;
    const int64_t unit = part == Partition::contiguous ? P.cp
                         : part == Partition::zigzag  ? 2 * int64_t(P.cp)
                                                      : int64_t(P.cp) * P.stripe_tokens;
    if (S % unit != 0) {
      rep.skipped.push_back(fmt::format("{}: seq_len {} is not divisible by {}", to_string(part), S, unit));
      done += m.layers() * P.hp;
      continue;
    }
    if (progress) progress(fmt::format("{}: partitioning", to_string(part)), done, total_work);
    const auto ranks = partition_for(part, e, m);

    PartitionImbalance pi;
    pi.partition = part;
    PairCache cache;
    // K/V bytes of one step for head rank 0 (all head ranks hold the same KV count).
    const HeadShard hs0 = head_shard(e.model, P.hp, 0);
    const double bytes = cost::kv_bytes(S / P.cp, hs0.kv_heads, e.model.head_dim, e.workload.batch);
    std::vector<double> transfer(static_cast<size_t>(K), 0.0);
    for (int k = 1; k < K; ++k)
      for (int r = 0; r < P.cp; ++r) {
        const int from = group[size_t(sender[size_t(k)][size_t(r)])], to = group[size_t(r)];
        const auto& route = topo.route(from, to);
        const double eff = route.slowest == LinkClass::nvlink ? e.cluster.cost.nvlink_efficiency
                           : route.slowest == LinkClass::pcie ? e.cluster.cost.pcie_efficiency
                                                              : e.cluster.cost.network_efficiency;
        const double t = route.latency_us * 1e-6 + bytes / (route.bottleneck_GBps * 1e9 * eff);
        transfer[size_t(k)] = std::max(transfer[size_t(k)], t);
      }
    pi.kv_transfer_seconds = *std::max_element(transfer.begin(), transfer.end());

    double sum_max_w = 0, sum_mean_w = 0, sum_step_w = 0;
    double sum_max_n = 0, sum_mean_n = 0, sum_step_n = 0;
    for (int l = 0; l < m.layers(); ++l) {
      // work[(h, r)][k] over every GPU of the context groups of all head ranks.
      std::vector<std::vector<double>> wb(static_cast<size_t>(P.hp * P.cp), std::vector<double>(size_t(K)));
      std::vector<std::vector<double>> wn = wb;
      for (int h = 0; h < P.hp; ++h) {
        const auto costs = layer_pair_costs(m, l, head_shard(e.model, P.hp, h), ranks, shape, cache);
        for (int r = 0; r < P.cp; ++r)
          for (int k = 0; k < K; ++k) {
            const auto& c = costs[size_t(r) * size_t(P.cp) + size_t(src[size_t(k)][size_t(r)])];
            wb[size_t(h * P.cp + r)][size_t(k)] = double(c.blocks);
            wn[size_t(h * P.cp + r)][size_t(k)] = double(c.nnz);
          }
        if (progress) progress(fmt::format("{}: layer {}/{}", to_string(part), l + 1, m.layers()), ++done, total_work);
      }
      const Ratios rb = ratios(wb), rn = ratios(wn);
      LayerImbalance li;
      li.worker = rb.worker;
      li.step = rb.step;
      li.worker_nnz = rn.worker;
      li.step_nnz = rn.step;
      for (const auto& row : wb) li.blocks += std::accumulate(row.begin(), row.end(), 0.0);
      li.step_seconds = cost::attention_fwd_seconds(e.cluster, rb.step_max_sum * flops_per_block, sparse);
      li.ideal_seconds = cost::attention_fwd_seconds(e.cluster, rb.mean_sum * flops_per_block, sparse);
      for (int k = 0; k + 1 < K; ++k) {
        double mx = 0;
        for (const auto& row : wb) mx = std::max(mx, row[size_t(k)]);
        const double compute = cost::attention_fwd_seconds(e.cluster, mx * flops_per_block, sparse);
        ++li.transfer_steps;
        if (compute < transfer[size_t(k + 1)]) ++li.overlap_lost_steps;
      }
      sum_max_w += rb.max_sum;
      sum_mean_w += rb.mean_sum;
      sum_step_w += rb.step_max_sum;
      sum_max_n += rn.max_sum;
      sum_mean_n += rn.mean_sum;
      sum_step_n += rn.step_max_sum;
      pi.total.blocks += li.blocks;
      pi.total.step_seconds += li.step_seconds;
      pi.total.ideal_seconds += li.ideal_seconds;
      pi.total.overlap_lost_steps += li.overlap_lost_steps;
      pi.total.transfer_steps += li.transfer_steps;
      pi.layers.push_back(li);
    }
    auto safe = [](double a, double b) { return b > 0 ? a / b : 1.0; };
    pi.total.worker = safe(sum_max_w, sum_mean_w);
    pi.total.step = safe(sum_step_w, sum_mean_w);
    pi.total.worker_nnz = safe(sum_max_n, sum_mean_n);
    pi.total.step_nnz = safe(sum_step_n, sum_mean_n);
    pi.ideal_fraction = safe(pi.total.ideal_seconds, pi.total.step_seconds);
    rep.partitions.push_back(std::move(pi));
  }
  return rep;
}

}  // namespace rm
