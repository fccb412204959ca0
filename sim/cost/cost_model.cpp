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

namespace {

// Ring of `steps` steps over n members: at step k member i sends one chunk to
// i+1. It may start once its own previous send is done (one channel per
// direction) and once the chunk it forwards arrived from i-1 at step k-1.
std::vector<PlannedTransfer> ring(int n, int steps, double chunk) {
  std::vector<PlannedTransfer> out;
  out.reserve(size_t(n) * size_t(steps));
  for (int k = 0; k < steps; ++k)
    for (int i = 0; i < n; ++i) {
      PlannedTransfer t{i, (i + 1) % n, chunk, {-1, -1}};
      if (k > 0) t.deps = {(k - 1) * n + i, (k - 1) * n + (i + n - 1) % n};
      out.push_back(t);
    }
  return out;
}

// Pairwise all-to-all: at stage k (1..n-1) member i sends to i+k and receives
// from i-k; a stage starts once the member's previous send and the receiver's
// previous receive are done.
std::vector<PlannedTransfer> pairwise(int n, double chunk) {
  std::vector<PlannedTransfer> out;
  out.reserve(size_t(n) * size_t(n - 1));
  for (int k = 1; k < n; ++k)
    for (int i = 0; i < n; ++i) {
      PlannedTransfer t{i, (i + k) % n, chunk, {-1, -1}};
      // the previous receive of (i+k) came from (i+k)-(k-1) = i+1
      if (k > 1) t.deps = {(k - 2) * n + i, (k - 2) * n + (i + 1) % n};
      out.push_back(t);
    }
  return out;
}

// Pipelined chain root -> root+1 -> ... -> root+n-1, `chunks` chunks: chunk c
// on hop h follows chunk c-1 on the same hop and chunk c on hop h-1.
std::vector<PlannedTransfer> chain(int n, int root, int chunks, double chunk) {
  std::vector<PlannedTransfer> out;
  const int hops = n - 1;
  out.reserve(size_t(hops) * size_t(chunks));
  for (int c = 0; c < chunks; ++c)
    for (int h = 0; h < hops; ++h) {
      PlannedTransfer t{(root + h) % n, (root + h + 1) % n, chunk, {-1, -1}};
      if (c > 0) t.deps[0] = (c - 1) * hops + h;
      if (h > 0) t.deps[1] = c * hops + h - 1;
      out.push_back(t);
    }
  return out;
}

int broadcast_chunks(double bytes) {
  return std::clamp(static_cast<int>(std::ceil(bytes / kBroadcastChunkBytes)), 1, kMaxBroadcastChunks);
}

}  // namespace

std::vector<PlannedTransfer> CostModel::plan_collective(OpKind kind, int n, double bytes, int root) {
  if (n < 1) throw std::invalid_argument("plan_collective: a group needs at least one member");
  if (n == 1) return {};
  switch (kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter: return ring(n, n - 1, bytes / n);
    case OpKind::all_reduce: return ring(n, 2 * (n - 1), bytes / n);
    case OpKind::all_to_all: return pairwise(n, bytes / n);
    case OpKind::broadcast: {
      const int c = broadcast_chunks(bytes);
      return chain(n, root, c, bytes / c);
    }
    default: throw std::invalid_argument("plan_collective: not a collective op kind");
  }
}

double CostModel::collective_seconds(OpKind kind, int n, double bytes, double lat, double rate) {
  if (n <= 1) return 0;
  const double dn = n;
  switch (kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: return (dn - 1) * (lat + bytes / dn / rate);
    case OpKind::all_reduce: return 2 * (dn - 1) * (lat + bytes / dn / rate);
    case OpKind::broadcast: {
      const int c = broadcast_chunks(bytes);
      return (c + dn - 2) * (lat + bytes / c / rate);
    }
    default: throw std::invalid_argument("collective_seconds: not a collective op kind");
  }
}

}  // namespace rm::cost
