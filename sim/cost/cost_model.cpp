#include "sim/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/cost/attention_cost.hpp"

namespace rm::cost {

using schedule::OpKind;

CostModel::CostModel(const Cluster& c, TileShape tile) : c_(c), tile_(tile) {
  local_rate_ = c_.gpu.hbm_bandwidth_GBps * 1e9 * c_.cost.elementwise_efficiency / 2.0;
}

double CostModel::rate_flops(OpKind kind, bool sparse_kernel) const {
  const double peak = c_.gpu.peak_tflops_bf16 * 1e12;
  const double sparse = sparse_kernel ? c_.cost.sparse_block_efficiency : 1.0;
  switch (kind) {
    case OpKind::attn_fwd:
    case OpKind::index_build: return peak * c_.cost.attention_fwd_efficiency * sparse;
    case OpKind::attn_bwd: return peak * c_.cost.attention_bwd_efficiency * sparse;
    default: return peak * c_.cost.gemm_efficiency;
  }
}

double CostModel::tile_flops(double blocks, bool backward) const {
  return tile_kernel_flops(blocks, tile_.bq, tile_.bk, tile_.head_dim, backward);
}

bool CostModel::sparse_kernel(double flops, double blocks, bool backward) const {
  return blocks > 0 && flops < kSparseKernelFill * tile_flops(blocks, backward);
}

double CostModel::seconds(OpKind kind, double flops, double blocks, double bytes) const {
  bool sparse = false;
  if (blocks > 0 && (kind == OpKind::attn_fwd || kind == OpKind::attn_bwd)) {
    // A tile kernel pays for every tile it computes, however few of its entries
    // the mask allows; a sparse-index kernel (vertical-slash, block-sparse) also
    // pays its gather overhead.
    const bool backward = kind == OpKind::attn_bwd;
    sparse = sparse_kernel(flops, blocks, backward);
    flops = std::max(flops, tile_flops(blocks, backward));
  }
  const double hbm = c_.gpu.hbm_bandwidth_GBps * 1e9 * c_.cost.elementwise_efficiency;
  const double t_flops = flops > 0 ? flops / rate_flops(kind, sparse) : 0.0;
  const double t_bytes = bytes > 0 ? bytes / hbm : 0.0;
  return c_.cost.kernel_launch_us * 1e-6 + std::max(t_flops, t_bytes);
}

double CostModel::compute_seconds(const schedule::Op& op) const {
  return seconds(op.kind, op.flops, double(op.blocks), double(op.bytes));
}

double CostModel::attention_seconds(double flops, double blocks, bool backward) const {
  return seconds(backward ? OpKind::attn_bwd : OpKind::attn_fwd, flops, blocks, 0);
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

double CostModel::transfer_seconds(const topology::Topology& t, int src_gpu, int dst_gpu, double bytes) const {
  const topology::Route& r = t.route(src_gpu, dst_gpu);
  if (r.links.empty()) return bytes / local_rate_;
  double rate = std::numeric_limits<double>::infinity();
  double lat = 0;
  for (int id : r.links) {
    const topology::Link& l = t.links()[static_cast<size_t>(id)];
    rate = std::min(rate, link_rate_Bps(l));
    lat += link_latency_s(l);
  }
  return lat + bytes / rate;
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
