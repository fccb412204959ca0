#include "runtime/cpu_compute.hpp"


#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/bf16.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/softmax_merge.hpp"
#include "runtime/dense_math.hpp"
#include "runtime/pattern_index.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::BufferRole;
using schedule::DType;
using schedule::OpKind;
using kernels::bf16_bits;

namespace {

// The op's buffer of one of `roles` among its reads (or writes); -1 when none.
int find(const schedule::Schedule& s, const std::vector<int>& ids, std::initializer_list<BufferRole> roles) {
  for (int b : ids)
    for (BufferRole r : roles)
      if (s.buffers[size_t(b)].role == r) return b;
  return -1;
}

void widen(std::span<const bf16_bits> in, std::span<float> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = kernels::from_bf16(in[i]);
}
void narrow(std::span<const float> in, std::span<bf16_bits> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = kernels::to_bf16(in[i]);
}
// Stores fp32 values into a buffer of dtype t (fp32 or bf16) at element offset `at`.
void store(std::span<const float> in, std::span<std::byte> buf, DType t, int64_t at) {
  if (t == DType::fp32) std::memcpy(buf.data() + at * 4, in.data(), in.size() * 4);
  else narrow(in, {reinterpret_cast<bf16_bits*>(buf.data()) + at, in.size()});
}
// Reads `n` elements of a buffer of dtype t as fp32 from element `at`; zeros past its end.
void load(std::span<const std::byte> buf, DType t, int64_t at, std::span<float> out) {
  const int64_t have = std::max<int64_t>(0, int64_t(buf.size()) / schedule::dtype_bytes(t) - at);
  const size_t n = size_t(std::min<int64_t>(have, int64_t(out.size())));
  if (t == DType::fp32) std::memcpy(out.data(), buf.data() + at * 4, n * 4);
  else if (t == DType::bf16) widen({reinterpret_cast<const bf16_bits*>(buf.data()) + at, n}, out.first(n));
  else for (size_t i = 0; i < n; ++i) out[i] = float(reinterpret_cast<const int32_t*>(buf.data())[at + int64_t(i)]);
  std::fill(out.begin() + std::ptrdiff_t(n), out.end(), 0.f);
}

}  // namespace

CpuCompute::CpuCompute(const schedule::Schedule& s, const Experiment& e, const BufferInstances& in, TensorStore& store)
    : s_(s), e_(e), in_(in), store_(store) {}

void CpuCompute::prepare() {
  const int group = e_.model.heads / std::max(1, e_.model.kv_heads);
  bool causal_known = false;
  for (const auto& op : s_.ops) {
    if (op.rank != store_.rank()) continue;
    if (op.kind == OpKind::index_build && !index_)
      throw schedule::ScheduleError(schedule::describe(s_, op.id) +
                                    ": index_build ops (dynamic sparse patterns, whose index is built at run time) run "
                                    "on the cpu backend only: export a dense or static pattern");
    if (op.kind != OpKind::attn_fwd && op.kind != OpKind::attn_bwd) continue;
    const schedule::Attention* a = s_.attention_of(op);
    if (!a) throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": an attention op without its descriptor");
    if (!causal_known) patterns_.causal = pattern_causal(e_), causal_known = true;
    for (int h = 0; h < a->heads; ++h)
      if ((a->head_begin + h) / group != a->kv_head_begin + h / std::max(1, a->heads / std::max(1, a->kv_heads)))
        throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": query head " + std::to_string(a->head_begin + h) +
                                      " does not map to its KV head inside the op's KV heads");
    for (int b : s_.access_of(op)->reads)
      if ((s_.buffers[size_t(b)].role == BufferRole::q || s_.buffers[size_t(b)].role == BufferRole::kv ||
           s_.buffers[size_t(b)].role == BufferRole::kv_slot) &&
          s_.buffers[size_t(b)].dtype != DType::bf16)
        throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": Q and K|V must be bf16");
    if (a->index == schedule::IndexSource::built) {
      if (!index_) throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": a built sparse index runs on the cpu backend only");
      int fed = -1;
      for (int b : s_.access_of(op)->reads)
        if (s_.buffers[size_t(b)].role == BufferRole::index && s_.buffers[size_t(b)].name.rfind("index.bars", 0) != 0) fed = b;
      if (fed < 0) throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": its index is built but it reads no index buffer");
      built_plans_.emplace(op.id, std::vector<kernels::TilePlan>(size_t(e_.workload.batch)));
      fed_by_[{fed, in_.copy(op.id, fed)}].push_back(op.id);
      continue;
    }
    const int layer = a->index == schedule::IndexSource::pattern ? op.layer : -1;
    const auto key = std::pair{s_.desc(op).detail, layer};
    if (plans_.count(key)) continue;
    kernels::SparseIndex index;
    if (a->index == schedule::IndexSource::pattern) {
      auto it = patterns_.by_layer.find(op.layer);
      if (it == patterns_.by_layer.end()) {
        // One sparsity model for every layer: building it draws every head of the step.
        if (!patterns_.model) patterns_.model = std::make_unique<sparsity::SparsityModel>(pattern_model(e_));
        it = patterns_.by_layer.emplace(op.layer, pattern_index(*patterns_.model, op.layer, e_.source)).first;
      }
      const kernels::SparseIndex& all = it->second;
      index.mode = all.mode;
      for (int h = a->head_begin; h < a->head_begin + a->heads; ++h) {
        if (all.mode == kernels::SparseMode::vertical_slash) index.vertical_slash.push_back(all.vertical_slash.at(size_t(h)));
        if (all.mode == kernels::SparseMode::block_mask) index.block_mask.push_back(all.block_mask.at(size_t(h)));
      }
    }
    plans_.emplace(key, make_tile_plan(op, index));
  }
}

kernels::TilePlan CpuCompute::make_tile_plan(const schedule::Op& op, const kernels::SparseIndex& index) const {
  const schedule::Attention* a = s_.attention_of(op);
  kernels::TileLayout layout;
  layout.q_pos = positions(s_.token_sets.at(size_t(a->q_tokens)));
  layout.k_pos = positions(s_.token_sets.at(size_t(a->kv_tokens)));
  layout.seq_len = int32_t(e_.workload.seq_len);
  layout.causal = patterns_.causal;
  const kernels::TileShape shape{a->heads, a->kv_heads, e_.model.head_dim, int(layout.q_pos.size()),
                                 int(layout.k_pos.size())};
  try {
    return kernels::make_plan(shape, layout, index);
  } catch (const std::invalid_argument& x) {
    throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": the kernels cannot run this tile: " + x.what());
  }
}

void CpuCompute::use_index(IndexBuilding* x) {
  index_ = x;
  x->on_built([this](int buffer, int copy, int head_begin, const std::vector<kernels::SparseIndex>& built) {
    auto it = fed_by_.find({buffer, copy});
    if (it == fed_by_.end()) return;
    for (schedule::OpId id : it->second) {
      const schedule::Op& op = s_.ops[size_t(id)];
      const schedule::Attention* a = s_.attention_of(op);
      std::vector<kernels::TilePlan>& plans = built_plans_.at(id);
      for (size_t b = 0; b < plans.size(); ++b) {
        kernels::SparseIndex mine;
        mine.mode = built.at(b).mode;
        for (int h = a->head_begin; h < a->head_begin + a->heads; ++h)
          mine.vertical_slash.push_back(built[b].vertical_slash.at(size_t(h - head_begin)));
        plans[b] = make_tile_plan(op, mine);
      }
      if (replanned_) replanned_(id);
    }
  });
}

const kernels::TilePlan& CpuCompute::plan_of(const schedule::Op& op, int64_t b) const {
  const schedule::Attention* a = s_.attention_of(op);
  if (a->index == schedule::IndexSource::built) return built_plans_.at(op.id).at(size_t(b));
  const int layer = a->index == schedule::IndexSource::pattern ? op.layer : -1;
  return plans_.at({s_.desc(op).detail, layer});
}

void CpuCompute::run(schedule::OpId id) {
  const schedule::Op& op = s_.ops[size_t(id)];
  if (dense_ && dense_->runs(id)) return dense_->run(id, store_);
  if (step_ && step_->runs(id)) return step_->run(id, store_);
  switch (op.kind) {
    case OpKind::attn_fwd: attention(op, false); break;
    case OpKind::attn_bwd: attention(op, true); break;
    case OpKind::gemm: gemm(op); break;
    case OpKind::elementwise: read_pass(op); break;
    case OpKind::index_build:
      if (!index_) throw schedule::ScheduleError(schedule::describe(s_, id) + ": no index building on this backend");
      index_->run(id);
      break;
    default:
      throw schedule::ScheduleError(schedule::describe(s_, id) + ": not a compute op the cpu backend runs");
  }
}

void CpuCompute::attention(const schedule::Op& op, bool backward) {
  const schedule::Attention& a = *s_.attention_of(op);
  const schedule::Access& acc = *s_.access_of(op);
  const int64_t B = e_.workload.batch, D = e_.model.head_dim;
  const kernels::TilePlan& plan0 = plan_of(op);  // the shape; batch b runs plan_of(op, b)
  const int64_t Tq = plan0.shape.rows_q, Tk = plan0.shape.rows_k, H = a.heads, KVH = a.kv_heads;
  const int qb = find(s_, acc.reads, {BufferRole::q}), kvb = find(s_, acc.reads, {BufferRole::kv, BufferRole::kv_slot});
  auto q = store_.as<const bf16_bits>(qb, in_.copy(op.id, qb));
  auto kv = store_.as<const bf16_bits>(kvb, in_.copy(op.id, kvb));
  const int64_t qn = H * Tq * D, kn = KVH * Tk * D;
  std::vector<float> out(static_cast<size_t>(qn)), lse(static_cast<size_t>(H * Tq));
  if (!backward) {
    const int ob = find(s_, acc.writes, {BufferRole::o}), lb = find(s_, acc.writes, {BufferRole::lse});
    auto o = store_.as<bf16_bits>(ob, in_.copy(op.id, ob));
    auto l = store_.as<float>(lb, in_.copy(op.id, lb));
    std::vector<float> acc_o(a.merge ? size_t(qn) : 0);
    for (int64_t b = 0; b < B; ++b) {
      auto ob_ = o.subspan(size_t(b * qn), size_t(qn));
      auto lb_ = l.subspan(size_t(b * H * Tq), size_t(H * Tq));
      if (a.mask == schedule::Mask::empty) {
        if (!a.merge) {
          std::fill(ob_.begin(), ob_.end(), bf16_bits{0});
          std::fill(lb_.begin(), lb_.end(), -std::numeric_limits<float>::infinity());
        }
        continue;
      }
      const auto p = kernels::make_forward_params(plan_of(op, b), kernels::tensor(q.subspan(size_t(b * qn), size_t(qn))),
                                                  kernels::tensor(kv.subspan(size_t(b * kn), size_t(kn))),
                                                  kernels::tensor(kv.subspan(size_t((B + b) * kn), size_t(kn))), out, lse);
      kernels::cpu::attention_forward(p);
      if (!a.merge) {
        narrow(out, ob_);
        std::copy(lse.begin(), lse.end(), lb_.begin());
      } else {
        widen(ob_, acc_o);
        kernels::merge_partial(acc_o, lb_, out, lse, int(D));
        narrow(acc_o, ob_);
      }
    }
    return;
  }
  const int ob = find(s_, acc.reads, {BufferRole::o}), lb = find(s_, acc.reads, {BufferRole::lse});
  const int db = find(s_, acc.reads, {BufferRole::d_o});
  const int dqb = find(s_, acc.writes, {BufferRole::dq}), dkvb = find(s_, acc.writes, {BufferRole::dkv, BufferRole::dkv_slot});
  auto o = store_.as<const bf16_bits>(ob, in_.copy(op.id, ob));
  auto l = store_.as<const float>(lb, in_.copy(op.id, lb));
  auto dout = store_.as<const bf16_bits>(db, in_.copy(op.id, db));
  auto dq = store_.as<bf16_bits>(dqb, in_.copy(op.id, dqb));
  auto dkv = buffer(op, dkvb);
  const DType dkv_t = s_.buffers[size_t(dkvb)].dtype;
  std::vector<float> dq32(static_cast<size_t>(qn)), dk32(static_cast<size_t>(kn)), dv32(static_cast<size_t>(kn)),
      old(a.merge ? static_cast<size_t>(qn) : 0);
  for (int64_t b = 0; b < B; ++b) {
    auto dq_b = dq.subspan(size_t(b * qn), size_t(qn));
    if (a.mask == schedule::Mask::empty) {
      std::fill(dk32.begin(), dk32.end(), 0.f), std::fill(dv32.begin(), dv32.end(), 0.f);
      if (!a.merge) std::fill(dq_b.begin(), dq_b.end(), bf16_bits{0});
    } else {
      widen(o.subspan(size_t(b * qn), size_t(qn)), out);
      const auto p = kernels::make_backward_params(
          plan_of(op, b), kernels::tensor(q.subspan(size_t(b * qn), size_t(qn))), kernels::tensor(kv.subspan(size_t(b * kn), size_t(kn))),
          kernels::tensor(kv.subspan(size_t((B + b) * kn), size_t(kn))), kernels::tensor(dout.subspan(size_t(b * qn), size_t(qn))),
          out, l.subspan(size_t(b * H * Tq), size_t(H * Tq)), dq32, dk32, dv32, false);
      kernels::cpu::attention_backward(p);
      if (a.merge) {
        widen(dq_b, old);
        for (size_t i = 0; i < dq32.size(); ++i) dq32[i] += old[i];
      }
      narrow(dq32, dq_b);
    }
    store(dk32, dkv, dkv_t, b * kn);
    store(dv32, dkv, dkv_t, (B + b) * kn);
  }
}

void CpuCompute::gemm(const schedule::Op& op) {
  const schedule::Gemm* g = s_.gemm_of(op);
  const schedule::Access* acc = s_.access_of(op);
  if (!g || acc->reads.size() < 2 || acc->writes.empty())
    throw schedule::ScheduleError(schedule::describe(s_, op.id) + ": a GEMM needs its shape, two inputs and an output");
  const int64_t m = g->m, n = g->n, k = g->k;
  std::vector<float> A(static_cast<size_t>(m * k)), Bm(static_cast<size_t>(k * n)), C(static_cast<size_t>(m * n));
  auto in = [&](int i, std::span<float> out) {
    const int b = acc->reads[size_t(i)];
    load(buffer(op, b), s_.buffers[size_t(b)].dtype, 0, out);
  };
  in(0, A);
  in(1, Bm);
  // The backward computes dX and dW: two GEMMs of the forward's size.
  const int passes = op.phase == schedule::Phase::backward ? 2 : 1;
  for (int p = 0; p < passes; ++p)
    sgemm(false, false, m, n, k, A.data(), Bm.data(), p == 0 ? 0.f : 1.f, C.data());
  int64_t at = 0;
  for (int b : acc->writes) {
    auto buf = buffer(op, b);
    const DType t = s_.buffers[size_t(b)].dtype;
    const int64_t room = int64_t(buf.size()) / schedule::dtype_bytes(t);
    const int64_t n_out = std::min(room, int64_t(C.size()) - at);
    if (n_out <= 0 || t == DType::int32) break;
    store(std::span<const float>(C).subspan(size_t(at), size_t(n_out)), buf, t, 0);
    at += n_out;
  }
}

void CpuCompute::read_pass(const schedule::Op& op) {
  uint64_t sum = 0;
  for (int b : s_.access_of(op)->reads) {
    auto buf = buffer(op, b);
    const auto* w = reinterpret_cast<const uint64_t*>(buf.data());
    for (size_t i = 0; i < buf.size() / 8; ++i) sum += w[i];
  }
  static std::atomic<uint64_t> sink{0};
  sink.fetch_add(sum, std::memory_order_relaxed);
}

}  // namespace rm::runtime
