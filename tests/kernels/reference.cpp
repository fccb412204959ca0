#include "tests/kernels/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "kernels/bf16.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/plan.hpp"

namespace rm::kernels::test {

void fill_random(Problem& p, std::uint64_t seed, float spread) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  const auto d = static_cast<std::size_t>(p.shape.head_dim);
  auto gen = [&](std::vector<float>& v, std::size_t count, float s) {
    v.resize(count);
    for (auto& x : v) x = n(rng) * s;
  };
  gen(p.q, static_cast<std::size_t>(p.shape.heads_q) * static_cast<std::size_t>(p.shape.rows_q) * d, spread);
  gen(p.k, static_cast<std::size_t>(p.shape.heads_kv) * static_cast<std::size_t>(p.shape.rows_k) * d, 1.f);
  gen(p.v, static_cast<std::size_t>(p.shape.heads_kv) * static_cast<std::size_t>(p.shape.rows_k) * d, 1.f);
  gen(p.dout, p.q.size(), 1.f);
}

std::vector<std::int32_t> iota_pos(std::int32_t first, std::int32_t n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = first + i;
  return v;
}

std::vector<std::int32_t> partition_pos(const std::string& kind, std::int32_t seq_len, int ranks, int rank,
                                        std::int32_t stripe) {
  std::vector<std::int32_t> pos;
  for (std::int32_t t = 0; t < seq_len; ++t) {
    int owner = 0;
    if (kind == "contiguous") {
      owner = static_cast<int>(static_cast<std::int64_t>(t) * ranks / seq_len);
    } else if (kind == "zigzag") {
      const int chunk = static_cast<int>(static_cast<std::int64_t>(t) * 2 * ranks / seq_len);
      owner = chunk < ranks ? chunk : 2 * ranks - 1 - chunk;
    } else if (kind == "stripe") {
      owner = (t / stripe) % ranks;
    } else {
      throw std::invalid_argument("unknown partition " + kind);
    }
    if (owner == rank) pos.push_back(t);
  }
  return pos;
}

SparseIndex random_vertical_slash(int heads, std::int32_t seq_len, int verticals, int slashes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> pos(0, seq_len - 1);
  // Slash offsets favour small values, as real patterns do.
  std::geometric_distribution<std::int32_t> off(8.0 / std::max(seq_len, 8));
  SparseIndex idx;
  idx.mode = SparseMode::vertical_slash;
  for (int h = 0; h < heads; ++h) {
    std::set<std::int32_t> v, s{0};
    for (int i = 0; i < verticals; ++i) v.insert(pos(rng));
    for (int i = 0; i < slashes; ++i) s.insert(std::min(off(rng), seq_len - 1));
    idx.vertical_slash.push_back({{v.begin(), v.end()}, {s.begin(), s.end()}});
  }
  return idx;
}

SparseIndex random_block_mask(int heads, std::int32_t seq_len, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution on(density);
  SparseIndex idx;
  idx.mode = SparseMode::block_mask;
  const std::int32_t nb = index_blocks(seq_len);
  for (int h = 0; h < heads; ++h) {
    BlockMask m;
    m.rows.resize(static_cast<std::size_t>(nb));
    for (std::int32_t qb = 0; qb < nb; ++qb)
      for (std::int32_t kb = 0; kb < nb; ++kb)
        if (on(rng)) m.rows[static_cast<std::size_t>(qb)].push_back(kb);
    idx.block_mask.push_back(std::move(m));
  }
  return idx;
}

Reference reference_attention(const Problem& p, float scale, bool backward) {
  const auto& s = p.shape;
  const auto d = static_cast<std::size_t>(s.head_dim);
  const auto nq = static_cast<std::size_t>(s.rows_q), nk = static_cast<std::size_t>(s.rows_k);
  const int group = s.heads_q / s.heads_kv;
  const double sc = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  Reference r;
  r.out.assign(p.q.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(s.heads_q) * nq, -std::numeric_limits<double>::infinity());
  if (backward) {
    r.dq.assign(p.q.size(), 0.0);
    r.dk.assign(p.k.size(), 0.0);
    r.dv.assign(p.v.size(), 0.0);
  }
  std::vector<double> prob(nk);
  std::vector<char> mask(nk);
  for (int h = 0; h < s.heads_q; ++h) {
    const std::size_t kvh = static_cast<std::size_t>(h / group);
    for (std::size_t i = 0; i < nq; ++i) {
      const float* q = &p.q[(static_cast<std::size_t>(h) * nq + i) * d];
      double mx = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < nk; ++j) {
        mask[j] = attends(p.index, h, p.layout.q_pos[i], p.layout.k_pos[j], p.layout.causal);
        if (!mask[j]) continue;
        const float* k = &p.k[(kvh * nk + j) * d];
        double acc = 0;
        for (std::size_t e = 0; e < d; ++e) acc += static_cast<double>(q[e]) * k[e];
        prob[j] = acc * sc;
        mx = std::max(mx, prob[j]);
      }
      if (mx == -std::numeric_limits<double>::infinity()) continue;  // empty row: out 0, lse -inf
      double sum = 0;
      for (std::size_t j = 0; j < nk; ++j)
        if (mask[j]) sum += std::exp(prob[j] - mx);
      const double lse = mx + std::log(sum);
      r.lse[static_cast<std::size_t>(h) * nq + i] = lse;
      double* o = &r.out[(static_cast<std::size_t>(h) * nq + i) * d];
      for (std::size_t j = 0; j < nk; ++j) {
        prob[j] = mask[j] ? std::exp(prob[j] - lse) : 0.0;
        const float* v = &p.v[(kvh * nk + j) * d];
        for (std::size_t e = 0; e < d; ++e) o[e] += prob[j] * v[e];
      }
      if (!backward) continue;
      const float* dout = &p.dout[(static_cast<std::size_t>(h) * nq + i) * d];
      double delta = 0;
      for (std::size_t e = 0; e < d; ++e) delta += dout[e] * o[e];
      double* dq = &r.dq[(static_cast<std::size_t>(h) * nq + i) * d];
      for (std::size_t j = 0; j < nk; ++j) {
        if (!mask[j]) continue;
        const float* k = &p.k[(kvh * nk + j) * d];
        const float* v = &p.v[(kvh * nk + j) * d];
        double dp = 0;
        for (std::size_t e = 0; e < d; ++e) dp += static_cast<double>(dout[e]) * v[e];
        const double ds = prob[j] * (dp - delta) * sc;
        double* dk = &r.dk[(kvh * nk + j) * d];
        double* dv = &r.dv[(kvh * nk + j) * d];
        for (std::size_t e = 0; e < d; ++e) {
          dq[e] += ds * k[e];
          dk[e] += ds * q[e];
          dv[e] += prob[j] * dout[e];
        }
      }
    }
  }
  return r;
}

double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double err = 0, size = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    err = std::max(err, std::abs(a[i] - b[i]));
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    size = std::max(size, std::abs(b[i]));
  }
  return err / size;
}

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_error(a, std::vector<double>(b.begin(), b.end()));
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [](float x) { return kernels::to_bf16(x); });
  return out;
}

Forward cpu_forward(const Problem& p, bool bf16, float scale) {
  const TilePlan plan = make_plan(p.shape, p.layout, p.index);
  Forward f;
  f.out.assign(p.q.size(), std::numeric_limits<float>::quiet_NaN());  // poisoned: every element must be written
  f.lse.assign(static_cast<std::size_t>(p.shape.heads_q) * static_cast<std::size_t>(p.shape.rows_q),
               std::numeric_limits<float>::quiet_NaN());
  if (bf16) {
    const auto q = to_bf16(p.q), k = to_bf16(p.k), v = to_bf16(p.v);
    cpu::attention_forward(make_forward_params(plan, tensor(q), tensor(k), tensor(v), f.out, f.lse, scale));
  } else {
    cpu::attention_forward(make_forward_params(plan, tensor(p.q), tensor(p.k), tensor(p.v), f.out, f.lse, scale));
  }
  return f;
}

Backward cpu_backward(const Problem& p, const Forward& fwd, bool bf16, float scale) {
  const TilePlan plan = make_plan(p.shape, p.layout, p.index);
  Backward b;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  b.dq.assign(p.q.size(), nan);
  b.dk.assign(p.k.size(), nan);
  b.dv.assign(p.v.size(), nan);
  if (bf16) {
    const auto q = to_bf16(p.q), k = to_bf16(p.k), v = to_bf16(p.v), d = to_bf16(p.dout);
    cpu::attention_backward(make_backward_params(plan, tensor(q), tensor(k), tensor(v), tensor(d), fwd.out, fwd.lse,
                                                 b.dq, b.dk, b.dv, false, scale));
  } else {
    cpu::attention_backward(make_backward_params(plan, tensor(p.q), tensor(p.k), tensor(p.v), tensor(p.dout), fwd.out,
                                                 fwd.lse, b.dq, b.dk, b.dv, false, scale));
  }
  return b;
}

void round_to_bf16(std::vector<float>& v) {
  for (auto& x : v) x = round_bf16(x);
}

}  // namespace rm::kernels::test
