#include "runtime/reference_layer.hpp"

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/plan.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/dense_math.hpp"

namespace rm::runtime {

Model LayerProblem::model() const {
  Model m;
  m.name = "reference";
  m.layers = layer + 1;
  m.hidden = hidden, m.intermediate = intermediate;
  m.heads = heads, m.kv_heads = kv_heads, m.head_dim = head_dim;
  return m;
}

namespace {

void check_sizes(const LayerProblem& p) {
  auto fail = [](const std::string& field, const std::string& what) {
    throw std::invalid_argument("reference layer: " + field + " " + what);
  };
  if (p.batch < 1) fail("batch", "must be >= 1 (got " + std::to_string(p.batch) + ")");
  if (p.seq_len < 1) fail("seq_len", "must be >= 1 (got " + std::to_string(p.seq_len) + ")");
  if (p.hidden < 1) fail("hidden", "must be >= 1 (got " + std::to_string(p.hidden) + ")");
  if (p.intermediate < 1) fail("intermediate", "must be >= 1 (got " + std::to_string(p.intermediate) + ")");
  if (p.heads < 1) fail("heads", "must be >= 1 (got " + std::to_string(p.heads) + ")");
  if (p.kv_heads < 1 || p.heads % p.kv_heads != 0)
    fail("kv_heads", "must divide heads = " + std::to_string(p.heads) + " (got " + std::to_string(p.kv_heads) + ")");
  if (p.head_dim < 1) fail("head_dim", "must be >= 1 (got " + std::to_string(p.head_dim) + ")");
}

void check_inputs(const LayerProblem& p, size_t x, size_t dy, size_t w) {
  const size_t rows = size_t(p.batch) * size_t(p.seq_len) * size_t(p.hidden);
  const size_t params = size_t(WeightLayout(p.model()).total);
  if (x != rows) throw std::invalid_argument("reference layer: x must hold batch x seq_len x hidden = " + std::to_string(rows) + " values");
  if (p.backward && dy != rows)
    throw std::invalid_argument("reference layer: dy must hold batch x seq_len x hidden = " + std::to_string(rows) + " values");
  if (w != params) throw std::invalid_argument("reference layer: weights must hold " + std::to_string(params) + " values");
}

// Between the dense rows [b x S + s][q | k | v columns] and the kernels' [heads][S][D]
// of one batch: `block` is the column offset of the q, k or v block.
template <class T>
void to_heads(const std::vector<T>& rows, int64_t width, int64_t block, int64_t b, int64_t S, int heads, int64_t D,
              std::vector<T>& out) {
  out.resize(size_t(heads) * size_t(S * D));
  for (int h = 0; h < heads; ++h)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d)
        out[size_t((h * S + s) * D + d)] = rows[size_t((b * S + s) * width + block + h * D + d)];
}
template <class T>
void from_heads(const T* in, int64_t width, int64_t block, int64_t b, int64_t S, int heads, int64_t D, std::vector<T>& rows) {
  for (int h = 0; h < heads; ++h)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d)
        rows[size_t((b * S + s) * width + block + h * D + d)] = in[size_t((h * S + s) * D + d)];
}

}  // namespace

LayerInputs seeded_layer_inputs(const LayerProblem& p) {
  check_sizes(p);
  const WeightLayout w(p.model());
  LayerInputs in;
  const int64_t S = p.seq_len, H = p.hidden;
  in.x.resize(size_t(p.batch * S * H));
  if (p.backward) in.dy.resize(in.x.size());
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t f = 0; f < H; ++f) {
        const size_t at = size_t((b * S + s) * H + f);
        in.x[at] = dense_input_value(p.seed, DenseInput::x, b, s, f);
        if (p.backward) in.dy[at] = dense_input_value(p.seed, DenseInput::dy, b, s, f);
      }
  in.weights.resize(size_t(w.total));
  for (int64_t i = 0; i < w.total; ++i) in.weights[size_t(i)] = weight_value(w, p.seed, p.layer, i);
  return in;
}

LayerResult reference_layer(const LayerProblem& p, const LayerInputs& in) {
  check_sizes(p);
  check_inputs(p, in.x.size(), in.dy.size(), in.weights.size());
  const WeightLayout w(p.model());
  const int64_t S = p.seq_len, rows = p.batch * S, H = p.hidden, I = p.intermediate, N = w.qkv_width(), D = p.head_dim;
  const float* W = in.weights.data();
  const std::span<const float> w1(W + w.norm1, size_t(H)), w2(W + w.norm2, size_t(H));
  std::vector<float> xn1(in.x.size()), qkv(size_t(rows * N)), o(size_t(rows * w.q)), h = in.x, hn(in.x.size()),
      gu(size_t(rows * 2 * I)), act(size_t(rows * I));
  rms_norm(in.x, w1, xn1, H);
  sgemm(false, false, rows, N, H, xn1.data(), W + w.qkv, 0.f, qkv.data());

  kernels::TileLayout tl;
  tl.q_pos.resize(size_t(S));
  std::iota(tl.q_pos.begin(), tl.q_pos.end(), 0);
  tl.k_pos = tl.q_pos;
  tl.seq_len = int32_t(S);
  tl.causal = p.causal;
  const kernels::TilePlan plan = kernels::make_plan({p.heads, p.kv_heads, p.head_dim, int(S), int(S)}, tl, p.index);
  const size_t nq = size_t(p.heads * S * D), nkv = size_t(p.kv_heads * S * D), nl = size_t(p.heads * S);
  LayerResult r;
  ReferenceResult& a = r.attention;
  a.o.resize(size_t(p.batch) * nq);
  a.lse.resize(size_t(p.batch) * nl);
  std::vector<std::vector<float>> q(size_t(p.batch)), k(size_t(p.batch)), v(size_t(p.batch));
  for (int64_t b = 0; b < p.batch; ++b) {
    to_heads(qkv, N, 0, b, S, p.heads, D, q[size_t(b)]);
    to_heads(qkv, N, w.q, b, S, p.kv_heads, D, k[size_t(b)]);
    to_heads(qkv, N, w.q + w.kv, b, S, p.kv_heads, D, v[size_t(b)]);
    kernels::cpu::attention_forward(kernels::make_forward_params(
        plan, kernels::tensor(q[size_t(b)]), kernels::tensor(k[size_t(b)]), kernels::tensor(v[size_t(b)]),
        std::span<float>(a.o.data() + size_t(b) * nq, nq), std::span<float>(a.lse.data() + size_t(b) * nl, nl)));
    from_heads(a.o.data() + size_t(b) * nq, w.q, 0, b, S, p.heads, D, o);
  }
  sgemm(false, false, rows, H, w.q, o.data(), W + w.o, 1.f, h.data());  // h = x + O W_o
  rms_norm(h, w2, hn, H);
  sgemm(false, false, rows, 2 * I, H, hn.data(), W + w.gu, 0.f, gu.data());
  swiglu(gu, act, I);
  r.y = h;
  sgemm(false, false, rows, H, I, act.data(), W + w.down, 1.f, r.y.data());  // y = h + act W_down
  if (!p.backward) return r;

  r.wgrad.assign(size_t(w.total), 0.f);
  float* dW = r.wgrad.data();
  std::vector<float> dact(act.size()), dgu(gu.size()), dhn(hn.size()), dh(h.size()), d_o(o.size()), dqkv(qkv.size()),
      dxn1(xn1.size());
  r.dx.resize(in.x.size());
  sgemm(false, true, rows, I, H, in.dy.data(), W + w.down, 0.f, dact.data());
  sgemm(true, false, I, H, rows, act.data(), in.dy.data(), 0.f, dW + w.down);
  swiglu_backward(gu, dact, dgu, I);
  sgemm(false, true, rows, H, 2 * I, dgu.data(), W + w.gu, 0.f, dhn.data());
  sgemm(true, false, H, 2 * I, rows, hn.data(), dgu.data(), 0.f, dW + w.gu);
  rms_norm_backward(h, w2, dhn, in.dy, dh, H);
  sgemm(false, true, rows, w.q, H, dh.data(), W + w.o, 0.f, d_o.data());
  sgemm(true, false, w.q, H, rows, o.data(), dh.data(), 0.f, dW + w.o);
  a.dq.resize(a.o.size());
  a.dk.resize(size_t(p.batch) * nkv);
  a.dv.resize(size_t(p.batch) * nkv);
  std::vector<float> dob;
  for (int64_t b = 0; b < p.batch; ++b) {
    to_heads(d_o, w.q, 0, b, S, p.heads, D, dob);
    float* dq = a.dq.data() + size_t(b) * nq;
    float* dk = a.dk.data() + size_t(b) * nkv;
    float* dv = a.dv.data() + size_t(b) * nkv;
    kernels::cpu::attention_backward(kernels::make_backward_params(
        plan, kernels::tensor(q[size_t(b)]), kernels::tensor(k[size_t(b)]), kernels::tensor(v[size_t(b)]),
        kernels::tensor(dob), std::span<const float>(a.o.data() + size_t(b) * nq, nq),
        std::span<const float>(a.lse.data() + size_t(b) * nl, nl), std::span<float>(dq, nq), std::span<float>(dk, nkv),
        std::span<float>(dv, nkv), /*accumulate=*/false));
    from_heads(dq, N, 0, b, S, p.heads, D, dqkv);
    from_heads(dk, N, w.q, b, S, p.kv_heads, D, dqkv);
    from_heads(dv, N, w.q + w.kv, b, S, p.kv_heads, D, dqkv);
  }
  sgemm(false, true, rows, H, N, dqkv.data(), W + w.qkv, 0.f, dxn1.data());
  sgemm(true, false, H, N, rows, xn1.data(), dqkv.data(), 0.f, dW + w.qkv);
  rms_norm_backward(in.x, w1, dxn1, dh, r.dx, H);
  return r;
}

// ---- fp64 by plain loops ---------------------------------------------------------------

namespace {

using Vec = std::vector<double>;

// C[m x n] = A[m x k] B[k x n] (+ C when add), with A or B read transposed as asked.
void matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c, bool add) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = add ? c[i * n + j] : 0.0;
      for (int64_t l = 0; l < k; ++l) s += (ta ? a[l * m + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * n + j]);
      c[i * n + j] = s;
    }
}

double inv_rms(const double* x, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1.0 / std::sqrt(ss / double(n) + double(kRmsNormEps));
}

void norm64(const Vec& x, const double* w, Vec& y, int64_t H) {
  y.resize(x.size());
  for (size_t r = 0; r * size_t(H) < x.size(); ++r) {
    const double* xr = x.data() + r * size_t(H);
    const double inv = inv_rms(xr, H);
    for (int64_t i = 0; i < H; ++i) y[r * size_t(H) + size_t(i)] = xr[i] * inv * w[i];
  }
}

// d/dx of sum_i dy_i x_i w_i / rms(x), written out from the quotient rule.
void norm64_backward(const Vec& x, const double* w, const Vec& dy, const Vec& residual, Vec& dx, int64_t H) {
  dx.resize(x.size());
  for (size_t r = 0; r * size_t(H) < x.size(); ++r) {
    const size_t at = r * size_t(H);
    const double inv = inv_rms(x.data() + at, H);
    double dot = 0;
    for (int64_t i = 0; i < H; ++i) dot += dy[at + size_t(i)] * w[i] * x[at + size_t(i)];
    for (int64_t j = 0; j < H; ++j)
      dx[at + size_t(j)] = residual[at + size_t(j)] + dy[at + size_t(j)] * w[j] * inv -
                           x[at + size_t(j)] * dot * inv * inv * inv / double(H);
  }
}

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

struct Forward64 {
  Vec xn1, qkv, o, lse, h, hn, gu, act, y;
};

// Attention of one layer over [b x S + s][q | k | v] rows, O into o [rows][q].
void attention64(const LayerProblem& p, const WeightLayout& w, const Vec& qkv, Vec& o, Vec& lse) {
  const int64_t S = p.seq_len, D = p.head_dim, N = w.qkv_width(), group = p.heads / p.kv_heads;
  const double scale = 1.0 / std::sqrt(double(D));
  o.assign(size_t(p.batch * S * w.q), 0.0);
  lse.assign(size_t(p.batch * p.heads * S), -std::numeric_limits<double>::infinity());
  Vec score(static_cast<size_t>(S));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const double* qi = qkv.data() + (b * S + i) * N + h * D;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          score[size_t(j)] = -std::numeric_limits<double>::infinity();
          if (!kernels::attends(p.index, h, int32_t(i), int32_t(j), p.causal)) continue;
          const double* kj = qkv.data() + (b * S + j) * N + w.q + (h / group) * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          score[size_t(j)] = scale * dot;
          m = std::max(m, score[size_t(j)]);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += std::exp(score[size_t(j)] - m);
        const double l = m + std::log(sum);
        lse[size_t((b * p.heads + h) * S + i)] = l;
        double* oi = o.data() + (b * S + i) * w.q + h * D;
        for (int64_t j = 0; j < S; ++j) {
          const double pj = std::exp(score[size_t(j)] - l);
          const double* vj = qkv.data() + (b * S + j) * N + w.q + w.kv + (h / group) * D;
          for (int64_t d = 0; d < D; ++d) oi[d] += pj * vj[d];
        }
      }
}

Forward64 forward64(const LayerProblem& p, const Vec& x, const Vec& W) {
  const WeightLayout w(p.model());
  const int64_t rows = p.batch * p.seq_len, H = p.hidden, I = p.intermediate, N = w.qkv_width();
  Forward64 f;
  norm64(x, W.data() + w.norm1, f.xn1, H);
  f.qkv.resize(size_t(rows * N));
  matmul(false, false, rows, N, H, f.xn1.data(), W.data() + w.qkv, f.qkv.data(), false);
  attention64(p, w, f.qkv, f.o, f.lse);
  f.h = x;
  matmul(false, false, rows, H, w.q, f.o.data(), W.data() + w.o, f.h.data(), true);
  norm64(f.h, W.data() + w.norm2, f.hn, H);
  f.gu.resize(size_t(rows * 2 * I));
  matmul(false, false, rows, 2 * I, H, f.hn.data(), W.data() + w.gu, f.gu.data(), false);
  f.act.resize(size_t(rows * I));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < I; ++i) {
      const double g = f.gu[size_t(r * 2 * I + i)], u = f.gu[size_t(r * 2 * I + I + i)];
      f.act[size_t(r * I + i)] = g * sigmoid(g) * u;
    }
  f.y = f.h;
  matmul(false, false, rows, H, I, f.act.data(), W.data() + w.down, f.y.data(), true);
  return f;
}

std::vector<float> narrow(const Vec& v) { return {v.begin(), v.end()}; }

}  // namespace

std::vector<double> brute_force_layer_output(const LayerProblem& p, const std::vector<double>& x,
                                             const std::vector<double>& weights) {
  check_sizes(p);
  check_inputs(p, x.size(), p.backward ? x.size() : 0, weights.size());
  return forward64(p, x, weights).y;
}

LayerResult brute_force_layer(const LayerProblem& p, const LayerInputs& in) {
  check_sizes(p);
  check_inputs(p, in.x.size(), in.dy.size(), in.weights.size());
  const WeightLayout w(p.model());
  const int64_t S = p.seq_len, rows = p.batch * S, H = p.hidden, I = p.intermediate, N = w.qkv_width(), D = p.head_dim;
  const int64_t group = p.heads / p.kv_heads;
  const Vec x(in.x.begin(), in.x.end()), W(in.weights.begin(), in.weights.end());
  const Forward64 f = forward64(p, x, W);
  LayerResult r;
  r.y = narrow(f.y);
  // Attention tensors in reference.hpp's layout.
  ReferenceResult& a = r.attention;
  a.o.resize(size_t(p.batch * p.heads * S * D));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          a.o[size_t(((b * p.heads + h) * S + s) * D + d)] = float(f.o[size_t((b * S + s) * w.q + h * D + d)]);
  a.lse = narrow(f.lse);
  if (!p.backward) return r;

  const Vec dy(in.dy.begin(), in.dy.end());
  Vec dW(size_t(w.total), 0.0), dact(f.act.size()), dgu(f.gu.size()), dhn(f.hn.size()), dh, d_o(f.o.size()),
      dqkv(f.qkv.size(), 0.0), dxn1(f.xn1.size()), dx;
  matmul(false, true, rows, I, H, dy.data(), W.data() + w.down, dact.data(), false);
  matmul(true, false, I, H, rows, f.act.data(), dy.data(), dW.data() + w.down, false);
  for (int64_t rr = 0; rr < rows; ++rr)
    for (int64_t i = 0; i < I; ++i) {
      const size_t gi = size_t(rr * 2 * I + i), ui = gi + size_t(I);
      const double g = f.gu[gi], u = f.gu[ui], d = dact[size_t(rr * I + i)], sg = sigmoid(g);
      dgu[gi] = d * u * (sg + g * sg * (1 - sg));
      dgu[ui] = d * g * sg;
    }
  matmul(false, true, rows, H, 2 * I, dgu.data(), W.data() + w.gu, dhn.data(), false);
  matmul(true, false, H, 2 * I, rows, f.hn.data(), dgu.data(), dW.data() + w.gu, false);
  norm64_backward(f.h, W.data() + w.norm2, dhn, dy, dh, H);
  matmul(false, true, rows, w.q, H, dh.data(), W.data() + w.o, d_o.data(), false);
  matmul(true, false, w.q, H, rows, f.o.data(), dh.data(), dW.data() + w.o, false);
  // Attention backward: dS_ij = P_ij (dO_i . V_j - dO_i . O_i).
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const double l = f.lse[size_t((b * p.heads + h) * S + i)];
        if (l == -std::numeric_limits<double>::infinity()) continue;
        const double* qi = f.qkv.data() + (b * S + i) * N + h * D;
        const double* oi = f.o.data() + (b * S + i) * w.q + h * D;
        const double* gi = d_o.data() + (b * S + i) * w.q + h * D;
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += gi[d] * oi[d];
        for (int64_t j = 0; j < S; ++j) {
          if (!kernels::attends(p.index, h, int32_t(i), int32_t(j), p.causal)) continue;
          const int64_t kcol = w.q + (h / group) * D, vcol = kcol + w.kv;
          const double* kj = f.qkv.data() + (b * S + j) * N + kcol;
          const double* vj = f.qkv.data() + (b * S + j) * N + vcol;
          double dot = 0, dp = 0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d], dp += gi[d] * vj[d];
          const double pj = std::exp(scale * dot - l), ds = pj * (dp - delta);
          for (int64_t d = 0; d < D; ++d) {
            dqkv[size_t((b * S + i) * N + h * D + d)] += scale * ds * kj[d];
            dqkv[size_t((b * S + j) * N + kcol + d)] += scale * ds * qi[d];
            dqkv[size_t((b * S + j) * N + vcol + d)] += pj * gi[d];
          }
        }
      }
  matmul(false, true, rows, H, N, dqkv.data(), W.data() + w.qkv, dxn1.data(), false);
  matmul(true, false, H, N, rows, f.xn1.data(), dqkv.data(), dW.data() + w.qkv, false);
  norm64_backward(x, W.data() + w.norm1, dxn1, dh, dx, H);
  r.dx = narrow(dx);
  r.wgrad = narrow(dW);
  a.dq.resize(a.o.size());
  a.dk.resize(size_t(p.batch * p.kv_heads * S * D));
  a.dv.resize(a.dk.size());
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const double* row = dqkv.data() + (b * S + s) * N;
      for (int h = 0; h < p.heads; ++h)
        for (int64_t d = 0; d < D; ++d) a.dq[size_t(((b * p.heads + h) * S + s) * D + d)] = float(row[h * D + d]);
      for (int h = 0; h < p.kv_heads; ++h)
        for (int64_t d = 0; d < D; ++d) {
          a.dk[size_t(((b * p.kv_heads + h) * S + s) * D + d)] = float(row[w.q + h * D + d]);
          a.dv[size_t(((b * p.kv_heads + h) * S + s) * D + d)] = float(row[w.q + w.kv + h * D + d]);
        }
    }
  return r;
}

}  // namespace rm::runtime
