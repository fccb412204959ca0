#include "sim/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "sim/cost/attention_cost.hpp"
#include "sim/cost/kernel_rate.hpp"

namespace rm::cost {

using schedule::OpKind;

CostModel::CostModel(const Cluster& c, AttentionKernel kernel, TileShape tile)
    : c_(c), kernel_(std::move(kernel)), tile_(tile) {
  local_rate_ = c_.gpu.hbm_bandwidth_GBps * 1e9 * c_.cost.elementwise_efficiency / 2.0;
}

double CostModel::attention_tflops(bool backward, bool causal, double tokens) const {
  return interpolate_tflops(kernel_.curve(backward, causal), tokens);
}

AttentionCall CostModel::attention_call(const schedule::Schedule& s, const schedule::Op& op,
                                        const schedule::OpDesc& od) {
  AttentionCall a{od.flops, double(od.blocks), op.kind == OpKind::attn_bwd, true, double(od.tokens)};
  const schedule::Attention* d = s.attention_of(op.kind, od);
  auto set = [&](int id) { return id >= 0 && size_t(id) < s.token_sets.size() ? &s.token_sets[size_t(id)] : nullptr; };
  if (d && set(d->q_tokens) && set(d->kv_tokens)) {
    const schedule::TokenSet& q = *set(d->q_tokens);
    a.causal_mask = d->mask == schedule::Mask::causal;
    a.causal = a.causal_mask && q == *set(d->kv_tokens);
    a.tokens = double(q.size());
  }
  return a;
}

double CostModel::attention_work_seconds(const AttentionCall& a) const {
  double work = a.flops;
  const double tile_work = a.blocks > 0 ? tile_kernel_flops(a.blocks, tile_.bq, tile_.bk, tile_.head_dim, a.backward) : 0;
  // A tile kernel pays for every entry of every tile it executes, however few
  // the mask allows; FlashAttention's measured rates already fold in its masking.
  if (kernel_.work == KernelWork::tiles) work = std::max(work, tile_work);
  // A dense kernel whose tiles the causal mask cuts must run its causal mask,
  // diagonal call or not (attention_call). Tile kernels (MTraining's) apply it at step 0 only.
  const bool cut = kernel_.work == KernelWork::allowed_pairs && a.causal_mask && a.flops < tile_work * (1 - 1e-9);
  return work > 0 ? work / (attention_tflops(a.backward, a.causal || cut, a.tokens) * 1e12) : 0.0;
}

double CostModel::attention_seconds(const AttentionCall& a) const {
  return c_.cost.kernel_launch_us * 1e-6 + attention_work_seconds(a);
}

double CostModel::compute_seconds(const schedule::Schedule& s, const schedule::Op& op,
                                  const schedule::OpDesc& d) const {
  const bool attention = op.kind == OpKind::attn_fwd || op.kind == OpKind::attn_bwd;
  const double gemm_rate = c_.gpu.peak_tflops_bf16 * 1e12 * c_.cost.gemm_efficiency;
  const double hbm = c_.gpu.hbm_bandwidth_GBps * 1e9 * c_.cost.elementwise_efficiency;
  const double t_work = attention ? attention_work_seconds(attention_call(s, op, d)) : d.flops > 0 ? d.flops / gemm_rate : 0.0;
  const double t_bytes = d.bytes > 0 ? double(d.bytes) / hbm : 0.0;
  return c_.cost.kernel_launch_us * 1e-6 + std::max(t_work, t_bytes);
}

double CostModel::link_rate_Bps(const topology::Link& l) const {
  double eff = 1.0;
  switch (l.cls) {
    case topology::LinkClass::nvlink: eff = c_.cost.nvlink_efficiency; break;
    case topology::LinkClass::pcie: eff = c_.cost.pcie_efficiency; break;
    case topology::LinkClass::network: eff = c_.cost.network_efficiency; break;
  }
  return l.bandwidth_GBps * 1e9 * eff;
}

CostModel::RouteCost CostModel::route_cost(const topology::Topology& t, const topology::Route& r) const {
  if (r.links.empty()) return {0.0, local_rate_};
  RouteCost c{0.0, std::numeric_limits<double>::infinity()};
  for (int id : r.links) {
    const topology::Link& l = t.links()[static_cast<size_t>(id)];
    c.rate_Bps = std::min(c.rate_Bps, link_rate_Bps(l));
    c.latency_s += link_latency_s(l);
  }
  return c;
}

double CostModel::transfer_seconds(const topology::Topology& t, int src_gpu, int dst_gpu, double bytes) const {
  // An empty route has latency 0 (0 + x == x exactly: the sum is what it was).
  return transfer_seconds(route_cost(t, src_gpu, dst_gpu), bytes);
}

}  // namespace rm::cost
