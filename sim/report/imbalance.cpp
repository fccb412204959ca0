#include "sim/report/imbalance.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "sim/cost/attention_cost.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/placement/attention_kind.hpp"
#include "sim/placement/device_map.hpp"

namespace rm::report {

namespace {

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

double total(const std::vector<std::vector<double>>& work) {
  double t = 0;
  for (const auto& row : work) t += std::accumulate(row.begin(), row.end(), 0.0);
  return t;
}

// The context rank that sends c its K/V for step k >= 1, as the ring emitter
// moves it: the inner predecessor inside a round, the outer one at a round's start.
int sender(const placement::RingLayout& l, const std::vector<std::pair<int, int>>& pos, int c, int k) {
  const auto [o, i] = pos[size_t(c)];
  const int O = l.outer(), I = l.inner();
  return k % I != 0 ? l.rings[size_t(o)][size_t((i - 1 + I) % I)] : l.rings[size_t((o - 1 + O) % O)][size_t(i)];
}

}  // namespace

ImbalanceReport imbalance_report(const Experiment& e, const sparsity::SparsityModel& m, const topology::Topology& topo,
                                 const std::vector<Partition>& partitions, const Progress& progress,
                                 placement::WorkCache* cache) {
  const auto& P = e.parallel;
  const sparsity::BlockShape shape{e.workload.block_q, e.workload.block_k};
  placement::WorkCache own;
  placement::WorkCache& work = cache ? *cache : own;
  const cost::CostModel cost = cost::CostModel::for_experiment(e);
  ImbalanceReport rep;
  for (int l = 0; l < m.layers(); ++l) rep.block_sparsity += m.block_sparsity(l, shape) / m.layers();

  // Every head rank's context group (data-parallel replicas repeat the same work;
  // with tp > 1, tensor rank 0's, on its share of the heads).
  const placement::DeviceMap dm(P);
  const auto kind = placement::make_attention_kind(e);
  std::vector<std::vector<int>> groups;
  std::vector<placement::RingLayout> layouts;
  for (int h = 0; h < P.hp; ++h) {
    groups.push_back(dm.context_group(0, h, 0));
    layouts.push_back(kind->layout(groups.back(), topo));
  }
  const int K = P.cp, G = P.hp * P.cp;

  // The slowest K/V transfer into each step k >= 1, contention-free; all head
  // ranks hold as many KV heads, so head rank 0 sizes the message.
  const double bytes =
      cost::kv_bytes(e.workload.seq_len / P.cp, placement::head_shard(e.model, P, 0, 0).kv_heads, e.model.head_dim,
                     e.workload.batch);
  std::vector<double> transfer(static_cast<size_t>(K), 0.0);
  for (int h = 0; h < P.hp; ++h) {
    const auto& l = layouts[size_t(h)];
    std::vector<std::pair<int, int>> pos(static_cast<size_t>(P.cp));
    for (int o = 0; o < l.outer(); ++o)
      for (int i = 0; i < l.inner(); ++i) pos[size_t(l.rings[size_t(o)][size_t(i)])] = {o, i};
    for (int k = 1; k < K; ++k)
      for (int c = 0; c < P.cp; ++c) {
        const int from = groups[size_t(h)][size_t(sender(l, pos, c, k))], to = groups[size_t(h)][size_t(c)];
        transfer[size_t(k)] = std::max(transfer[size_t(k)], cost.transfer_seconds(topo, from, to, bytes));
      }
  }
  const double kv_transfer = *std::max_element(transfer.begin(), transfer.end());

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
    const auto& ranks = work.partition(part, e, m);

    PartitionImbalance pi;
    pi.partition = part;
    pi.kv_transfer_seconds = kv_transfer;
    double sum_max_w = 0, sum_mean_w = 0, sum_step_w = 0;
    double sum_max_n = 0, sum_mean_n = 0, sum_step_n = 0;
    for (int l = 0; l < m.layers(); ++l) {
      // Per GPU (h, c) of d = 0 and ring step k: computed blocks, non-zeros, and
      // the attn_fwd op's seconds as the schedule would carry it.
      std::vector<std::vector<double>> wb(static_cast<size_t>(G), std::vector<double>(size_t(K)));
      std::vector<std::vector<double>> wn = wb, secs = wb;
      // batch included, as on the ops; [0]: the diagonal (causal) calls, [1]: the others
      double flops_sum[2] = {0, 0}, blocks_sum[2] = {0, 0};
      for (int h = 0; h < P.hp; ++h) {
        const auto costs = work.head_rank_pairs(m, l, placement::head_shard(e.model, P, h, 0), ranks, shape);
        const auto& src = layouts[size_t(h)].sources;
        for (int c = 0; c < P.cp; ++c)
          for (int k = 0; k < K; ++k) {
            const auto& t = costs[size_t(c) * size_t(P.cp) + size_t(src[size_t(k)][size_t(c)])];
            const size_t g = size_t(h * P.cp + c);
            const double flops = cost::attention_flops(t.nnz, e.model.head_dim, e.workload.batch, false);
            const double blocks = double(t.blocks * e.workload.batch);
            wb[g][size_t(k)] = double(t.blocks);
            wn[g][size_t(k)] = double(t.nnz);
            const int source = src[size_t(k)][size_t(c)];
            // tokens per call and the diagonal (causal) call, as CostModel::attention_call reads them off an op
            secs[g][size_t(k)] = cost.attention_seconds(
                {flops, blocks, false, source == c, double(ranks[size_t(c)].size()), m.causal()});
            flops_sum[source == c ? 0 : 1] += flops;
            blocks_sum[source == c ? 0 : 1] += blocks;
          }
        if (progress) progress(fmt::format("{}: layer {}/{}", to_string(part), l + 1, m.layers()), ++done, total_work);
      }
      const Ratios rb = ratios(wb), rn = ratios(wn);
      LayerImbalance li;
      li.worker = rb.worker;
      li.step = rb.step;
      li.worker_nnz = rn.worker;
      li.step_nnz = rn.step;
      li.blocks = total(wb);
      // Every rank doing the mean work of each kind of call: one diagonal step, K-1 others.
      const double tokens = double(e.workload.seq_len / P.cp);
      li.ideal_seconds = cost.attention_seconds({flops_sum[0] / G, blocks_sum[0] / G, false, true, tokens});
      if (K > 1)
        li.ideal_seconds += double(K - 1) * cost.attention_seconds({flops_sum[1] / (double(G) * (K - 1)),
                                                                     blocks_sum[1] / (double(G) * (K - 1)), false,
                                                                     false, tokens});
      for (int k = 0; k < K; ++k) {
        double slowest = 0;
        for (const auto& row : secs) slowest = std::max(slowest, row[size_t(k)]);
        li.step_seconds += slowest;
        if (k + 1 < K) {
          ++li.transfer_steps;
          if (slowest < transfer[size_t(k + 1)]) ++li.overlap_lost_steps;
        }
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

}  // namespace rm::report
