#include "kernels/cpu/attention_cpu.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/bf16.hpp"

// Hot loops are compiled for AVX-512 and AVX2 as well as the baseline, and
// picked at load time, so one binary is fast here and still runs anywhere.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define RINGMASTER_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RINGMASTER_HOT
#endif

namespace rm::kernels::cpu {
namespace {

constexpr int kMaxDim = 128;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Run fn(i) for i in [0, n) on all cores.
template <class Fn>
void parallel_for(int n, Fn fn) {
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::max(n, 1));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

// Copy `count` rows of `dim` elements into fp32; rows[r] (or first+r) is the source row.
void load_rows(const void* base, DType dtype, std::size_t row0, const std::int32_t* rows, std::int32_t first,
               int count, int dim, float* dst) {
  for (int r = 0; r < count; ++r) {
    const std::size_t src = row0 + static_cast<std::size_t>(rows ? rows[r] : first + r);
    if (dtype == DType::f32) {
      std::memcpy(dst + static_cast<std::size_t>(r) * dim, static_cast<const float*>(base) + src * dim,
                  sizeof(float) * static_cast<std::size_t>(dim));
    } else {
      const auto* b = static_cast<const bf16_bits*>(base) + src * dim;
      for (int d = 0; d < dim; ++d) dst[static_cast<std::size_t>(r) * dim + d] = from_bf16(b[d]);
    }
  }
}

// exp(x) for x <= 0 within ~2 ulp, branch-free so loops vectorise; exp(-inf) = 0.
// exp(x) = 2^n * 2^f with n = round(x log2 e), |f| <= 1/2, 2^f by its
// degree-7 Taylor series (truncation error < 1e-8 relative).
inline float exp_nonpositive(float x) {
  const float t = std::max(x * 1.44269504f, -126.f);
  const float n = std::floor(t + 0.5f);
  const float f = t - n;
  float p = 1.5252734e-5f;
  p = p * f + 1.5403530e-4f;
  p = p * f + 1.3333558e-3f;
  p = p * f + 9.6181291e-3f;
  p = p * f + 5.5504109e-2f;
  p = p * f + 2.4022651e-1f;
  p = p * f + 6.9314718e-1f;
  p = p * f + 1.0f;
  const std::int32_t e = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof(scale));
  return x < -87.0f ? 0.f : p * scale;
}

// S[i][0..63] = sum_d Q[i][d] * KT[d][j]; KT is the key chunk transposed.
RINGMASTER_HOT void scores(const float* Q, int rows, int dim, const float* KT, float* S) {
  for (int i = 0; i < rows; ++i) {
    float acc[kKeyRows] = {};
    const float* q = Q + static_cast<std::size_t>(i) * dim;
    for (int d = 0; d < dim; ++d) {
      const float qd = q[d];
      const float* kt = KT + static_cast<std::size_t>(d) * kKeyRows;
      for (int j = 0; j < kKeyRows; ++j) acc[j] += qd * kt[j];
    }
    std::memcpy(S + static_cast<std::size_t>(i) * kKeyRows, acc, sizeof(acc));
  }
}

// C[i][:] += sum_j A[i][j] * B[j][:], A is [rows][64], B is [nk][dim].
RINGMASTER_HOT void accumulate_ab(const float* A, int rows, int nk, const float* B, int dim, float* C) {
  for (int i = 0; i < rows; ++i) {
    float c[kMaxDim];
    float* crow = C + static_cast<std::size_t>(i) * dim;
    std::memcpy(c, crow, sizeof(float) * static_cast<std::size_t>(dim));
    for (int j = 0; j < nk; ++j) {
      const float a = A[static_cast<std::size_t>(i) * kKeyRows + j];
      const float* b = B + static_cast<std::size_t>(j) * dim;
      for (int d = 0; d < dim; ++d) c[d] += a * b[d];
    }
    std::memcpy(crow, c, sizeof(float) * static_cast<std::size_t>(dim));
  }
}

// C[j][:] += sum_i A[i][j] * B[i][:], A is [rows][64], B is [rows][dim], C is [nk][dim].
RINGMASTER_HOT void accumulate_atb(const float* A, int rows, int nk, const float* B, int dim, float* C) {
  for (int j = 0; j < nk; ++j) {
    float c[kMaxDim] = {};
    for (int i = 0; i < rows; ++i) {
      const float a = A[static_cast<std::size_t>(i) * kKeyRows + j];
      const float* b = B + static_cast<std::size_t>(i) * dim;
      for (int d = 0; d < dim; ++d) c[d] += a * b[d];
    }
    float* crow = C + static_cast<std::size_t>(j) * dim;
    for (int d = 0; d < dim; ++d) crow[d] += c[d];
  }
}

// One chunk of key rows as the kernels see it: rows, positions, K^T and V (or V^T).
struct KeyChunk {
  int count = 0;
  const std::int32_t* rows = nullptr;  // gathered rows, or null for contiguous from `first`
  std::int32_t first = 0;
  std::int32_t pos[kKeyRows];
  std::vector<float> kt, k, v, vt;
};

void load_chunk(const AttentionParams& p, const PlanItem& item, int kv_head, bool want_k, bool want_vt,
                KeyChunk& c) {
  const int dim = p.head_dim;
  c.count = item.count;
  c.rows = item.gathered ? p.plan.gathered_rows + item.begin : nullptr;
  c.first = item.gathered ? 0 : item.begin;
  const std::size_t row0 = static_cast<std::size_t>(kv_head) * static_cast<std::size_t>(p.rows_k);
  c.k.assign(static_cast<std::size_t>(kKeyRows) * dim, 0.f);
  c.v.assign(static_cast<std::size_t>(kKeyRows) * dim, 0.f);
  load_rows(p.k, p.dtype, row0, c.rows, c.first, c.count, dim, c.k.data());
  load_rows(p.v, p.dtype, row0, c.rows, c.first, c.count, dim, c.v.data());
  auto transpose = [&](const std::vector<float>& src, std::vector<float>& dst) {
    dst.assign(static_cast<std::size_t>(kKeyRows) * dim, 0.f);
    for (int j = 0; j < c.count; ++j)
      for (int d = 0; d < dim; ++d)
        dst[static_cast<std::size_t>(d) * kKeyRows + j] = src[static_cast<std::size_t>(j) * dim + d];
  };
  transpose(c.k, c.kt);
  if (want_vt) transpose(c.v, c.vt);
  if (!want_k) c.k.clear();
  for (int j = 0; j < kKeyRows; ++j)
    c.pos[j] = j < c.count ? p.plan.k_pos[c.rows ? c.rows[j] : c.first + j] : std::numeric_limits<std::int32_t>::max();
}

// Scaled, masked scores of a segment against a chunk: -inf where masked.
void masked_scores(const AttentionParams& p, const float* Q, const std::int32_t* qpos, int rows, const KeyChunk& c,
                   float* S) {
  scores(Q, rows, p.head_dim, c.kt.data(), S);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < kKeyRows; ++j) {
      float& s = S[static_cast<std::size_t>(i) * kKeyRows + j];
      const bool visible = j < c.count && (!p.causal || c.pos[j] <= qpos[i]);
      s = visible ? s * p.softmax_scale : kNegInf;
    }
}

struct ItemRange {
  const PlanItem* begin;
  const PlanItem* end;
};

ItemRange items_of(const PlanView& plan, int head, int seg) {
  const std::int64_t l = (plan.per_head ? static_cast<std::int64_t>(head) * plan.segments : 0) + seg;
  return {plan.items + plan.item_offsets[l], plan.items + plan.item_offsets[l + 1]};
}

void forward_segment(const AttentionParams& p, int head, int seg, KeyChunk& chunk, std::vector<float>& scratch) {
  const int dim = p.head_dim;
  const int rows = p.plan.seg_count[seg];
  const std::int32_t r0 = p.plan.seg_begin[seg];
  const int kv_head = head / (p.heads_q / p.heads_kv);
  scratch.assign(static_cast<std::size_t>(kQueryRows) * (2 * dim + kKeyRows + 2), 0.f);
  float* Q = scratch.data();
  float* O = Q + static_cast<std::size_t>(kQueryRows) * dim;
  float* S = O + static_cast<std::size_t>(kQueryRows) * dim;
  float* m = S + static_cast<std::size_t>(kQueryRows) * kKeyRows;
  float* l = m + kQueryRows;
  std::fill(m, m + kQueryRows, kNegInf);
  const std::size_t qrow0 = static_cast<std::size_t>(head) * static_cast<std::size_t>(p.rows_q);
  load_rows(p.q, p.dtype, qrow0, nullptr, r0, rows, dim, Q);
  const std::int32_t* qpos = p.plan.q_pos + r0;

  for (auto [it, end] = items_of(p.plan, head, seg); it != end; ++it) {
    load_chunk(p, *it, kv_head, false, false, chunk);
    masked_scores(p, Q, qpos, rows, chunk, S);
    for (int i = 0; i < rows; ++i) {
      float* s = S + static_cast<std::size_t>(i) * kKeyRows;
      float mx = m[i];
      for (int j = 0; j < kKeyRows; ++j) mx = std::max(mx, s[j]);
      if (mx == kNegInf) continue;  // nothing visible yet in this row: s stays all -inf, P = 0
      const float alpha = exp_nonpositive(m[i] - mx);
      float sum = 0;
      for (int j = 0; j < kKeyRows; ++j) {
        s[j] = exp_nonpositive(s[j] - mx);
        sum += s[j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mx;
      float* o = O + static_cast<std::size_t>(i) * dim;
      for (int d = 0; d < dim; ++d) o[d] *= alpha;
    }
    // Rows still at -inf have s = exp(-inf - (-inf)) unset: zero them before P.V.
    for (int i = 0; i < rows; ++i)
      if (m[i] == kNegInf) std::fill_n(S + static_cast<std::size_t>(i) * kKeyRows, kKeyRows, 0.f);
    accumulate_ab(S, rows, chunk.count, chunk.v.data(), dim, O);
  }

  for (int i = 0; i < rows; ++i) {
    float* dst = p.out + (qrow0 + static_cast<std::size_t>(r0 + i)) * dim;
    const float inv = l[i] > 0 ? 1.f / l[i] : 0.f;
    for (int d = 0; d < dim; ++d) dst[d] = O[static_cast<std::size_t>(i) * dim + d] * inv;
    p.lse[qrow0 + static_cast<std::size_t>(r0 + i)] = l[i] > 0 ? m[i] + std::log(l[i]) : kNegInf;
  }
}

void backward_segment(const AttentionParams& p, int head, int seg, KeyChunk& chunk, std::vector<float>& scratch) {
  const int dim = p.head_dim;
  const int rows = p.plan.seg_count[seg];
  const std::int32_t r0 = p.plan.seg_begin[seg];
  const int kv_head = head / (p.heads_q / p.heads_kv);
  const auto qk = static_cast<std::size_t>(kQueryRows) * kKeyRows;
  const auto qd = static_cast<std::size_t>(kQueryRows) * dim;
  const auto kd = static_cast<std::size_t>(kKeyRows) * dim;
  scratch.assign(4 * qd + 2 * qk + 2 * kd + 2 * kQueryRows, 0.f);
  float* Q = scratch.data();
  float* dO = Q + qd;
  float* O = dO + qd;
  float* dQ = O + qd;
  float* P = dQ + qd;
  float* dS = P + qk;
  float* dK = dS + qk;
  float* dV = dK + kd;
  float* lse = dV + kd;
  float* delta = lse + kQueryRows;

  const std::size_t qrow0 = static_cast<std::size_t>(head) * static_cast<std::size_t>(p.rows_q);
  load_rows(p.q, p.dtype, qrow0, nullptr, r0, rows, dim, Q);
  load_rows(p.dout, p.dtype, qrow0, nullptr, r0, rows, dim, dO);
  load_rows(p.out_in, DType::f32, qrow0, nullptr, r0, rows, dim, O);
  for (int i = 0; i < rows; ++i) {
    lse[i] = p.lse_in[qrow0 + static_cast<std::size_t>(r0 + i)];
    float acc = 0;  // delta_i = dO_i . O_i = sum_j P_ij dP_ij, the softmax-backward correction
    for (int d = 0; d < dim; ++d) acc += dO[static_cast<std::size_t>(i) * dim + d] * O[static_cast<std::size_t>(i) * dim + d];
    delta[i] = acc;
  }
  const std::int32_t* qpos = p.plan.q_pos + r0;
  const std::size_t krow0 = static_cast<std::size_t>(kv_head) * static_cast<std::size_t>(p.rows_k);

  for (auto [it, end] = items_of(p.plan, head, seg); it != end; ++it) {
    load_chunk(p, *it, kv_head, true, true, chunk);
    masked_scores(p, Q, qpos, rows, chunk, P);
    scores(dO, rows, dim, chunk.vt.data(), dS);  // dP = dO V^T, turned into dS in place
    for (int i = 0; i < rows; ++i) {
      float* pr = P + static_cast<std::size_t>(i) * kKeyRows;
      float* ds = dS + static_cast<std::size_t>(i) * kKeyRows;
      const float l = lse[i] == kNegInf ? std::numeric_limits<float>::infinity() : lse[i];  // empty row: P = 0
      for (int j = 0; j < kKeyRows; ++j) {
        pr[j] = exp_nonpositive(std::min(pr[j] - l, 0.f));
        ds[j] = pr[j] * (ds[j] - delta[i]) * p.softmax_scale;
      }
    }
    accumulate_ab(dS, rows, chunk.count, chunk.k.data(), dim, dQ);
    std::fill_n(dK, 2 * kd, 0.f);
    accumulate_atb(dS, rows, chunk.count, Q, dim, dK);
    accumulate_atb(P, rows, chunk.count, dO, dim, dV);
    for (int j = 0; j < chunk.count; ++j) {
      const std::size_t dst = (krow0 + static_cast<std::size_t>(chunk.rows ? chunk.rows[j] : chunk.first + j)) * dim;
      for (int d = 0; d < dim; ++d) {
        p.dk[dst + d] += dK[static_cast<std::size_t>(j) * dim + d];
        p.dv[dst + d] += dV[static_cast<std::size_t>(j) * dim + d];
      }
    }
  }
  for (int i = 0; i < rows; ++i) {
    float* dst = p.dq + (qrow0 + static_cast<std::size_t>(r0 + i)) * dim;
    for (int d = 0; d < dim; ++d) dst[d] += dQ[static_cast<std::size_t>(i) * dim + d];
  }
}

void check(const AttentionParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128)
    throw std::invalid_argument("cpu attention: head_dim " + std::to_string(p.head_dim) + " is not supported");
  if (p.plan.seg_begin == nullptr && p.rows_q > 0) throw std::invalid_argument("cpu attention: params have no plan");
  if (p.plan.on_device) throw std::invalid_argument("cpu attention: the plan is in GPU memory");
}

}  // namespace

void attention_forward(const AttentionParams& p) {
  check(p);
  if (p.out == nullptr || p.lse == nullptr) throw std::invalid_argument("cpu attention forward: out/lse missing");
  parallel_for(p.heads_q, [&](int head) {
    KeyChunk chunk;
    std::vector<float> scratch;
    for (int s = 0; s < p.plan.segments; ++s) forward_segment(p, head, s, chunk, scratch);
  });
}

void attention_backward(const AttentionParams& p) {
  check(p);
  if (p.dq == nullptr || p.dk == nullptr || p.dv == nullptr || p.dout == nullptr)
    throw std::invalid_argument("cpu attention backward: gradient tensors missing");
  const auto d = static_cast<std::size_t>(p.head_dim);
  if (!p.accumulate) {
    std::fill_n(p.dq, static_cast<std::size_t>(p.heads_q) * static_cast<std::size_t>(p.rows_q) * d, 0.f);
    std::fill_n(p.dk, static_cast<std::size_t>(p.heads_kv) * static_cast<std::size_t>(p.rows_k) * d, 0.f);
    std::fill_n(p.dv, static_cast<std::size_t>(p.heads_kv) * static_cast<std::size_t>(p.rows_k) * d, 0.f);
  }
  // One thread per KV head: it owns dk, dv of that head and dq of its query heads.
  const int group = p.heads_q / p.heads_kv;
  parallel_for(p.heads_kv, [&](int kv) {
    KeyChunk chunk;
    std::vector<float> scratch;
    for (int h = kv * group; h < (kv + 1) * group; ++h)
      for (int s = 0; s < p.plan.segments; ++s) backward_segment(p, h, s, chunk, scratch);
  });
}

}  // namespace rm::kernels::cpu
