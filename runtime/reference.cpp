#include "runtime/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/plan.hpp"
#include "runtime/seed.hpp"

namespace rm::runtime {
namespace {

void check_sizes(const ReferenceProblem& p) {
  auto fail = [](const std::string& field, const std::string& what) {
    throw std::invalid_argument("reference attention: " + field + " " + what);
  };
  if (p.batch < 1) fail("batch", "must be >= 1 (got " + std::to_string(p.batch) + ")");
  if (p.seq_len < 1) fail("seq_len", "must be >= 1 (got " + std::to_string(p.seq_len) + ")");
  if (p.heads < 1) fail("heads", "must be >= 1 (got " + std::to_string(p.heads) + ")");
  if (p.kv_heads < 1 || p.heads % p.kv_heads != 0)
    fail("kv_heads", "must divide heads = " + std::to_string(p.heads) + " (got " + std::to_string(p.kv_heads) + ")");
  if (p.head_dim < 1) fail("head_dim", "must be >= 1 (got " + std::to_string(p.head_dim) + ")");
  if (!p.per_batch.empty() && int64_t(p.per_batch.size()) != p.batch)
    fail("per_batch", "must hold one index per batch element (" + std::to_string(p.batch) + "), got " +
                          std::to_string(p.per_batch.size()));
}

// The whole sequence as one tile: every row at its own global position.
kernels::TileShape whole_shape(const ReferenceProblem& p) {
  return {p.heads, p.kv_heads, p.head_dim, p.seq_len, p.seq_len};
}
kernels::TileLayout whole_layout(const ReferenceProblem& p) {
  kernels::TileLayout l;
  l.q_pos.resize(static_cast<std::size_t>(p.seq_len));
  std::iota(l.q_pos.begin(), l.q_pos.end(), 0);
  l.k_pos = l.q_pos;
  l.seq_len = p.seq_len;
  l.causal = p.causal;
  return l;
}

// One batch's input tensor in the kernels' layout [heads][seq_len][head_dim].
std::vector<float> fill(const ReferenceProblem& p, InputTensor t, int64_t b, int heads) {
  const auto S = static_cast<std::size_t>(p.seq_len), D = static_cast<std::size_t>(p.head_dim);
  std::vector<float> x(static_cast<std::size_t>(heads) * S * D);
  for (int h = 0; h < heads; ++h)
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t d = 0; d < D; ++d)
        x[(static_cast<std::size_t>(h) * S + s) * D + d] =
            input_value(p.seed, t, b, static_cast<int64_t>(s), h, static_cast<int64_t>(d));
  return x;
}

struct Sizes {
  std::size_t q, kv, lse;  // elements per batch
};
Sizes sizes_of(const ReferenceProblem& p) {
  const auto S = static_cast<std::size_t>(p.seq_len), D = static_cast<std::size_t>(p.head_dim);
  return {static_cast<std::size_t>(p.heads) * S * D, static_cast<std::size_t>(p.kv_heads) * S * D,
          static_cast<std::size_t>(p.heads) * S};
}

ReferenceResult allocate(const ReferenceProblem& p) {
  const Sizes n = sizes_of(p);
  const auto B = static_cast<std::size_t>(p.batch);
  ReferenceResult r;
  r.o.resize(B * n.q);
  r.lse.resize(B * n.lse);
  if (p.backward) {
    r.dq.resize(B * n.q);
    r.dk.resize(B * n.kv);
    r.dv.resize(B * n.kv);
  }
  return r;
}

}  // namespace

ReferenceResult reference_attention(const ReferenceProblem& p) {
  check_sizes(p);
  std::vector<kernels::TilePlan> plans;  // one, or one per batch element
  for (int64_t b = 0; b < (p.per_batch.empty() ? 1 : p.batch); ++b)
    plans.push_back(kernels::make_plan(whole_shape(p), whole_layout(p), p.index_of(b)));
  const Sizes n = sizes_of(p);
  ReferenceResult r = allocate(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    const auto ub = static_cast<std::size_t>(b);
    const kernels::TilePlan& plan = plans[p.per_batch.empty() ? 0 : ub];
    const std::vector<float> q = fill(p, InputTensor::q, b, p.heads), k = fill(p, InputTensor::k, b, p.kv_heads),
                             v = fill(p, InputTensor::v, b, p.kv_heads);
    const std::span<float> o(r.o.data() + ub * n.q, n.q), lse(r.lse.data() + ub * n.lse, n.lse);
    kernels::cpu::attention_forward(kernels::make_forward_params(plan, kernels::tensor(q), kernels::tensor(k),
                                                                 kernels::tensor(v), o, lse));
    if (!p.backward) continue;
    // One tile holds every key, so its partial O and LSE are already the merged ones.
    const std::vector<float> d_o = fill(p, InputTensor::d_o, b, p.heads);
    kernels::cpu::attention_backward(kernels::make_backward_params(
        plan, kernels::tensor(q), kernels::tensor(k), kernels::tensor(v), kernels::tensor(d_o), o, lse,
        std::span<float>(r.dq.data() + ub * n.q, n.q), std::span<float>(r.dk.data() + ub * n.kv, n.kv),
        std::span<float>(r.dv.data() + ub * n.kv, n.kv), /*accumulate=*/false));
  }
  return r;
}

ReferenceResult brute_force_attention(const ReferenceProblem& p) {
  check_sizes(p);
  for (int64_t b = 0; b < p.batch; ++b) kernels::validate_tile(whole_shape(p), whole_layout(p), p.index_of(b));
  const Sizes n = sizes_of(p);
  const int S = p.seq_len, D = p.head_dim, group = p.heads / p.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  ReferenceResult r = allocate(p);
  std::vector<double> score(static_cast<std::size_t>(S)), prob(static_cast<std::size_t>(S));
  std::vector<double> o(static_cast<std::size_t>(D)), dq(static_cast<std::size_t>(D)), dk, dv;
  for (int64_t b = 0; b < p.batch; ++b) {
    const auto ub = static_cast<std::size_t>(b);
    const std::vector<float> q = fill(p, InputTensor::q, b, p.heads), k = fill(p, InputTensor::k, b, p.kv_heads),
                             v = fill(p, InputTensor::v, b, p.kv_heads), d_o = fill(p, InputTensor::d_o, b, p.heads);
    auto row = [&](const std::vector<float>& x, int h, int s) { return x.data() + (static_cast<std::size_t>(h) * S + s) * D; };
    // fp64 accumulators of dK, dV for the whole batch, rounded once at the end.
    dk.assign(n.kv, 0.0);
    dv.assign(n.kv, 0.0);
    for (int h = 0; h < p.heads; ++h) {
      const int kvh = h / group;
      for (int i = 0; i < S; ++i) {
        const float* qi = row(q, h, i);
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < S; ++j) {
          score[static_cast<std::size_t>(j)] = -std::numeric_limits<double>::infinity();
          if (!kernels::attends(p.index_of(b), h, i, j, p.causal)) continue;
          const float* kj = row(k, kvh, j);
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          score[static_cast<std::size_t>(j)] = scale * dot;
          m = std::max(m, scale * dot);
        }
        const std::size_t out = ub * n.q + (static_cast<std::size_t>(h) * S + i) * static_cast<std::size_t>(D);
        const std::size_t lse_at = ub * n.lse + static_cast<std::size_t>(h) * S + static_cast<std::size_t>(i);
        if (m == -std::numeric_limits<double>::infinity()) {  // no visible key: O = 0, dQ = 0
          r.lse[lse_at] = -std::numeric_limits<float>::infinity();
          continue;
        }
        double sum = 0;
        for (int j = 0; j < S; ++j) sum += std::exp(score[static_cast<std::size_t>(j)] - m);
        const double lse = m + std::log(sum);
        r.lse[lse_at] = static_cast<float>(lse);
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = 0; j < S; ++j) {
          prob[static_cast<std::size_t>(j)] = std::exp(score[static_cast<std::size_t>(j)] - lse);
          const float* vj = row(v, kvh, j);
          for (int d = 0; d < D; ++d) o[static_cast<std::size_t>(d)] += prob[static_cast<std::size_t>(j)] * vj[d];
        }
        for (int d = 0; d < D; ++d) r.o[out + static_cast<std::size_t>(d)] = static_cast<float>(o[static_cast<std::size_t>(d)]);
        if (!p.backward) continue;
        // dS_ij = P_ij (dO_i . V_j - dO_i . O_i); dQ_i = scale sum_j dS_ij K_j;
        // dK_j += scale dS_ij Q_i; dV_j += P_ij dO_i (all in fp64, from the fp64 O).
        const float* gi = row(d_o, h, i);
        double delta = 0;
        for (int d = 0; d < D; ++d) delta += static_cast<double>(gi[d]) * o[static_cast<std::size_t>(d)];
        std::fill(dq.begin(), dq.end(), 0.0);
        for (int j = 0; j < S; ++j) {
          const double pj = prob[static_cast<std::size_t>(j)];
          if (pj == 0) continue;
          const float* kj = row(k, kvh, j);
          const float* vj = row(v, kvh, j);
          double dp = 0;
          for (int d = 0; d < D; ++d) dp += static_cast<double>(gi[d]) * vj[d];
          const double ds = pj * (dp - delta);
          const std::size_t kv_at = (static_cast<std::size_t>(kvh) * S + static_cast<std::size_t>(j)) * static_cast<std::size_t>(D);
          for (int d = 0; d < D; ++d) {
            const auto ud = static_cast<std::size_t>(d);
            dq[ud] += scale * ds * kj[d];
            dk[kv_at + ud] += scale * ds * qi[d];
            dv[kv_at + ud] += pj * gi[d];
          }
        }
        for (int d = 0; d < D; ++d) r.dq[out + static_cast<std::size_t>(d)] = static_cast<float>(dq[static_cast<std::size_t>(d)]);
      }
    }
    if (!p.backward) continue;
    for (std::size_t x = 0; x < n.kv; ++x) {
      r.dk[ub * n.kv + x] = static_cast<float>(dk[x]);
      r.dv[ub * n.kv + x] = static_cast<float>(dv[x]);
    }
  }
  return r;
}

}  // namespace rm::runtime
