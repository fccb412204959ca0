#include "runtime/index_algorithm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/bf16.hpp"

namespace rm::runtime::index_alg {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float bf16(double x) { return kernels::round_bf16(static_cast<float>(x)); }

// Indices of the `count` largest scores, ties to the lower index; then the
// running share of the top-p rule over those, in that order.
std::vector<int64_t> top(std::span<const double> score, int64_t count) {
  std::vector<int64_t> order(score.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  count = std::clamp<int64_t>(count, 0, int64_t(order.size()));
  std::partial_sort(order.begin(), order.begin() + count, order.end(), [&](int64_t a, int64_t b) {
    return score[size_t(a)] != score[size_t(b)] ? score[size_t(a)] > score[size_t(b)] : a < b;
  });
  order.resize(size_t(count));
  return order;
}

// How many of the picks (best first) the rule keeps: static, the budget;
// top-p, those whose running sum (before them) is below p of the total.
int64_t keep(std::span<const double> score, const std::vector<int64_t>& picks, const Selection& sel, int64_t budget) {
  if (!sel.top_p) return std::min<int64_t>(budget, int64_t(picks.size()));
  double total = 0;
  for (double x : score) total += std::isfinite(x) ? x : 0.0;
  // calc_index: (cumsum < p).sum(), the running sum including each pick, best first.
  double run = 0;
  int64_t n = 0;
  for (int64_t i : picks) {
    run += score[size_t(i)];
    if (!(run < kTopP * total)) break;
    ++n;
  }
  return n;
}

}  // namespace

void scores(std::span<const float> q, std::span<const float> k, std::span<const int32_t> kpos, int64_t S, int D,
            std::span<float> out) {
  const int64_t Q = int64_t(q.size()) / D, N = int64_t(kpos.size());
  const double scale = 1.0 / std::sqrt(double(D));
  // Q K^T in double through OpenBLAS: products of bf16 values are exact, and the run and
  // the reference call this on the same shapes, so their sums agree bit for bit.
  const std::vector<double> a(q.begin(), q.end()), b(k.begin(), k.begin() + N * D);
  std::vector<double> dot(static_cast<size_t>(Q * N));
  if (Q > 0 && N > 0)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(Q), blasint(N), blasint(D), 1.0, a.data(), blasint(D),
                b.data(), blasint(D), 0.0, dot.data(), blasint(N));
  for (int64_t r = 0; r < Q; ++r) {
    const int64_t qpos = S - Q + r;
    for (int64_t j = 0; j < N; ++j)
      out[size_t(r * N + j)] = kpos[size_t(j)] > qpos ? -kInf : bf16(dot[size_t(r * N + j)] * scale);
  }
}

void row_max(std::span<const float> qk, int64_t n, std::span<float> out) {
  for (size_t r = 0; r < out.size(); ++r) {
    float m = -kInf;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, qk[r * size_t(n) + size_t(j)]);
    out[r] = m;
  }
}

void exp_rows(std::span<float> qk, int64_t n, std::span<const float> gmax, std::span<float> sums) {
  for (size_t r = 0; r < sums.size(); ++r) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) {
      float& x = qk[r * size_t(n) + size_t(j)];
      x = std::isfinite(x) ? bf16(std::exp(double(x) - double(gmax[r]))) : 0.f;
      s += x;
    }
    sums[r] = bf16(s);
  }
}

std::vector<float> combine_max(std::span<const float> parts, int64_t rows) {
  std::vector<float> out(size_t(rows), -kInf);
  for (size_t i = 0; i < parts.size(); ++i) out[i % size_t(rows)] = std::max(out[i % size_t(rows)], parts[i]);
  return out;
}

std::vector<float> combine_sum(std::span<const float> parts, int64_t rows) {
  std::vector<double> acc(size_t(rows), 0.0);
  for (size_t i = 0; i < parts.size(); ++i) acc[i % size_t(rows)] += parts[i];
  std::vector<float> out(static_cast<size_t>(rows));
  for (size_t r = 0; r < out.size(); ++r) out[r] = bf16(acc[r]);
  return out;
}

void normalize(std::span<float> qk, int64_t n, std::span<const float> gsum) {
  const double Q = double(gsum.size());
  for (size_t r = 0; r < gsum.size(); ++r)
    for (int64_t j = 0; j < n; ++j) {
      float& x = qk[r * size_t(n) + size_t(j)];
      x = bf16(double(x) / (double(gsum[r]) * Q));
    }
}

void columns(std::span<const float> qk, int64_t n, std::span<const int32_t> kpos, const Selection& sel,
             std::span<float> out) {
  const int64_t Q = int64_t(qk.size()) / std::max<int64_t>(n, 1);
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t r = 0; r < Q; ++r) s += qk[size_t(r * n + j)];
    out[size_t(j)] = !sel.top_p && kpos[size_t(j)] < sel.sink_tokens ? kInf : bf16(s);
  }
}

int64_t diagonal_min(int64_t S, int32_t first_key, int64_t n) { return (S - kLastQueries) - (int64_t(first_key) + n - 1); }

void diagonals(std::span<const float> qk, int64_t n, std::span<const int32_t> kpos, const Selection& sel,
               std::span<float> out) {
  const int64_t Q = int64_t(qk.size()) / std::max<int64_t>(n, 1), S = sel.seq_len;
  const int64_t dmin = diagonal_min(S, kpos.empty() ? 0 : kpos[0], n);
  std::vector<double> acc(out.size(), 0.0);
  std::vector<char> seen(out.size(), 0);
  for (int64_t r = 0; r < Q; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t d = (S - Q + r) - kpos[size_t(j)];
      if (d < 0) continue;
      const size_t at = size_t(d - dmin);
      acc[at] += qk[size_t(r * n + j)];
      seen[at] = 1;
    }
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t d = dmin + int64_t(i);
    if (!sel.top_p && d >= 0 && d < sel.local_diagonals) out[i] = kInf;
    else if (!seen[i]) out[i] = sel.top_p ? 0.f : -kInf;
    else out[i] = bf16(acc[i]);
  }
}

std::vector<double> vertical_scores(const std::vector<std::span<const float>>& cols,
                                    const std::vector<std::span<const int32_t>>& kpos, const Selection& sel) {
  std::vector<double> score(size_t(sel.seq_len), -std::numeric_limits<double>::infinity());
  for (size_t c = 0; c < cols.size(); ++c)
    for (size_t j = 0; j < kpos[c].size(); ++j) score[size_t(kpos[c][j])] = cols[c][j];
  return score;
}

std::vector<double> slash_scores(const std::vector<std::span<const float>>& diags, const std::vector<int64_t>& dmin,
                                 const Selection& sel) {
  const int64_t S = sel.seq_len;
  std::vector<double> score(size_t(S), 0.0);
  std::vector<char> inf(size_t(S), 0), seen(size_t(S), 0);
  for (size_t c = 0; c < diags.size(); ++c)
    for (size_t i = 0; i < diags[c].size(); ++i) {
      const int64_t d = dmin[c] + int64_t(i);
      if (d < 0 || d >= S) continue;
      const float x = diags[c][i];
      if (std::isinf(x)) {
        if (x > 0) inf[size_t(d)] = 1;
        continue;  // -inf: no visible pair there on that rank
      }
      score[size_t(d)] += x, seen[size_t(d)] = 1;
    }
  for (int64_t d = 0; d < S; ++d) {
    if (inf[size_t(d)]) score[size_t(d)] = std::numeric_limits<double>::infinity();
    else if (!seen[size_t(d)] && !sel.top_p) score[size_t(d)] = -std::numeric_limits<double>::infinity();
  }
  return score;
}

std::vector<int32_t> pick_verticals(std::span<const double> score, const Selection& sel, int head) {
  const auto picks = top(score, sel.v_slots);
  const int64_t n = keep(score, picks, sel, sel.top_p ? 0 : sel.v_budget.at(size_t(head)));
  std::vector<int32_t> out(picks.begin(), picks.begin() + n);
  std::sort(out.begin(), out.end());
  out.resize(size_t(sel.v_slots), int32_t(sel.seq_len));
  return out;
}

std::vector<int32_t> pick_slashes(std::span<const double> score, const Selection& sel, int head) {
  const auto picks = top(score, sel.s_slots);
  const int64_t n = keep(score, picks, sel, sel.top_p ? 0 : sel.s_budget.at(size_t(head)));
  std::vector<int32_t> out(picks.begin(), picks.begin() + n);
  std::sort(out.begin(), out.end(), std::greater<>());
  out.resize(size_t(sel.s_slots), -1);
  return out;
}

std::vector<int32_t> select_verticals(const std::vector<std::span<const float>>& cols,
                                      const std::vector<std::span<const int32_t>>& kpos, const Selection& sel, int head) {
  return pick_verticals(vertical_scores(cols, kpos, sel), sel, head);
}

std::vector<int32_t> select_slashes(const std::vector<std::span<const float>>& diags, const std::vector<int64_t>& dmin,
                                    const Selection& sel, int head) {
  return pick_slashes(slash_scores(diags, dmin, sel), sel, head);
}

kernels::VerticalSlash to_vertical_slash(std::span<const int32_t> v, std::span<const int32_t> s, int64_t S) {
  kernels::VerticalSlash vs;
  for (int32_t x : v)
    if (x >= 0 && x < S) vs.verticals.push_back(x);
  for (int32_t x : s)
    if (x >= 0 && x < S) vs.slashes.push_back(x);
  std::sort(vs.verticals.begin(), vs.verticals.end());
  vs.verticals.erase(std::unique(vs.verticals.begin(), vs.verticals.end()), vs.verticals.end());
  std::sort(vs.slashes.begin(), vs.slashes.end());
  vs.slashes.erase(std::unique(vs.slashes.begin(), vs.slashes.end()), vs.slashes.end());
  return vs;
}

}  // namespace rm::runtime::index_alg
