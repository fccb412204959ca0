#include "kernels/attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace rm::kernels {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("attention params: " + what); }

void expect(const void* data, std::size_t size, std::size_t want, const char* name) {
  if (data == nullptr && want > 0) fail(std::string(name) + " is missing");
  if (size != want)
    fail(std::string(name) + " has " + std::to_string(size) + " elements, the tile needs " + std::to_string(want));
}

AttentionParams common(const TilePlan& plan, ConstTensor q, ConstTensor k, ConstTensor v, float scale) {
  const auto& s = plan.shape;
  const auto d = static_cast<std::size_t>(s.head_dim);
  expect(q.data, q.size, static_cast<std::size_t>(s.heads_q) * static_cast<std::size_t>(s.rows_q) * d, "q");
  expect(k.data, k.size, static_cast<std::size_t>(s.heads_kv) * static_cast<std::size_t>(s.rows_k) * d, "k");
  expect(v.data, v.size, static_cast<std::size_t>(s.heads_kv) * static_cast<std::size_t>(s.rows_k) * d, "v");
  if (k.dtype != q.dtype || v.dtype != q.dtype) fail("q, k and v must have the same dtype");
  if (!(scale >= 0) || !std::isfinite(scale)) fail("softmax_scale must be finite and >= 0");
  AttentionParams p;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.head_dim;
  p.rows_q = s.rows_q;
  p.rows_k = s.rows_k;
  p.causal = plan.causal;
  p.softmax_scale = scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  p.dtype = q.dtype;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.plan = view_of(plan);
  return p;
}

}  // namespace

PlanView view_of(const TilePlan& plan) {
  return {plan.q_pos.data(),        plan.k_pos.data(), plan.seg_begin.data(),     plan.seg_count.data(),
          plan.item_offsets.data(), plan.items.data(), plan.gathered_rows.data(), plan.segments(),
          plan.per_head,        false};
}

AttentionParams make_forward_params(const TilePlan& plan, ConstTensor q, ConstTensor k, ConstTensor v,
                                    std::span<float> out, std::span<float> lse, float softmax_scale) {
  AttentionParams p = common(plan, q, k, v, softmax_scale);
  expect(out.data(), out.size(), q.size, "out");
  expect(lse.data(), lse.size(), static_cast<std::size_t>(p.heads_q) * static_cast<std::size_t>(p.rows_q), "lse");
  p.out = out.data();
  p.lse = lse.data();
  return p;
}

AttentionParams make_backward_params(const TilePlan& plan, ConstTensor q, ConstTensor k, ConstTensor v,
                                     ConstTensor dout, std::span<const float> out, std::span<const float> lse,
                                     std::span<float> dq, std::span<float> dk, std::span<float> dv,
                                     bool accumulate, float softmax_scale) {
  AttentionParams p = common(plan, q, k, v, softmax_scale);
  expect(dout.data, dout.size, q.size, "dout");
  if (dout.dtype != q.dtype) fail("dout must have the dtype of q");
  expect(out.data(), out.size(), q.size, "out");
  expect(lse.data(), lse.size(), static_cast<std::size_t>(p.heads_q) * static_cast<std::size_t>(p.rows_q), "lse");
  expect(dq.data(), dq.size(), q.size, "dq");
  expect(dk.data(), dk.size(), k.size, "dk");
  expect(dv.data(), dv.size(), v.size, "dv");
  p.dout = dout.data;
  p.out_in = out.data();
  p.lse_in = lse.data();
  p.dq = dq.data();
  p.dk = dk.data();
  p.dv = dv.data();
  p.accumulate = accumulate;
  return p;
}

}  // namespace rm::kernels
