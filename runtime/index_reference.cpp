#include "runtime/index_reference.hpp"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "kernels/bf16.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/dense_math.hpp"
#include "runtime/index_building.hpp"

namespace rm::runtime {

namespace alg = index_alg;

namespace {

constexpr int64_t kQ = alg::kLastQueries;
constexpr double kUlp = 1.0 / 128;  // a bf16 ulp relative to the value: at most 2^-7 (8 significant bits)

// A score that is a rounded sum of terms each off by at most `e`: off by at most
// E = sum e, and where E > 0 its own bf16 rounding may fall either way: + one ulp.
double rounded(double value, double sum_of_errors) {
  return sum_of_errors > 0 ? sum_of_errors + kUlp * (std::abs(value) + sum_of_errors) : 0.0;
}

}  // namespace

QKSource seeded_qk(uint64_t seed) {
  return {[seed](InputTensor t, int64_t b, int64_t pos, int head, int64_t d) { return input_value(seed, t, b, pos, head, d); },
          {}};
}

QKSource layer_qk(const LayerProblem& p) {
  const LayerInputs in = seeded_layer_inputs(p);
  const WeightLayout w(p.model());
  const int64_t S = p.seq_len, rows = p.batch * S, H = p.hidden, N = w.qkv_width();
  std::vector<float> xn(in.x.size());
  rms_norm(in.x, std::span<const float>(in.weights).subspan(size_t(w.norm1), size_t(H)), xn, H);
  auto qkv = std::make_shared<std::vector<float>>(size_t(rows * N));
  auto radius = std::make_shared<std::vector<float>>(size_t(rows * N));
  sgemm(false, false, rows, N, H, xn.data(), in.weights.data() + w.qkv, 0.f, qkv->data());
  // sum |x||w| (its own fp32 rounding is far below the margin of 3 gamma_k over the 2 gamma_k needed).
  std::vector<float> ax(xn.size()), aw(size_t(H * N));
  std::transform(xn.begin(), xn.end(), ax.begin(), [](float x) { return std::abs(x); });
  std::transform(in.weights.begin() + w.qkv, in.weights.begin() + w.qkv + H * N, aw.begin(), [](float x) { return std::abs(x); });
  sgemm(false, false, rows, N, H, ax.data(), aw.data(), 0.f, radius->data());
  const double u = std::ldexp(1.0, -24), gamma = double(H) * u / (1 - double(H) * u);
  for (float& r : *radius) r = float(3 * gamma * double(r));
  const int64_t D = p.head_dim, kv_at = w.q;
  auto at = [=](InputTensor t, int64_t b, int64_t pos, int head, int64_t d) {
    return size_t((b * S + pos) * N + (t == InputTensor::q ? 0 : kv_at) + head * D + d);
  };
  QKSource src;
  src.value = [qkv, at](InputTensor t, int64_t b, int64_t pos, int head, int64_t d) {
    return kernels::round_bf16((*qkv)[at(t, b, pos, head, d)]);
  };
  src.error = [qkv, radius, at](InputTensor t, int64_t b, int64_t pos, int head, int64_t d) {
    const float x = (*qkv)[at(t, b, pos, head, d)], r = (*radius)[at(t, b, pos, head, d)];
    return kernels::round_bf16(x + r) - kernels::round_bf16(x - r);  // 0 unless a rounding boundary lies within
  };
  return src;
}

ReferenceIndex reference_index(const schedule::Schedule& s, const Experiment& e, const Layouts& l,
                               const schedule::CommMatching& m, const QKSource& src, int layer) {
  const IndexPlan p = plan_index_building(s, e, l, m);
  const int64_t S = e.workload.seq_len, D = e.model.head_dim, B = e.workload.batch;
  const int group = e.model.heads / std::max(1, e.model.kv_heads);
  const double scale = 1.0 / std::sqrt(double(D));
  // One forward pass of the layer per context group: the passes with the same heads, one per key range.
  std::map<int, std::map<int32_t, const IndexPlan::Pass*>> groups;  // head_begin -> first key -> pass
  for (const auto& [op, pass] : p.pass_of) {
    const schedule::Op& o = s.ops[size_t(op)];
    if (o.layer != layer || o.phase != schedule::Phase::forward) continue;
    const IndexPlan::Pass& x = p.passes[size_t(pass)];
    if (!x.kpos.empty()) groups[x.head_begin].try_emplace(x.kpos[0], &x);
  }
  ReferenceIndex ref;
  ref.batch = B, ref.heads = e.model.heads, ref.exact = !src.error;
  alg::Selection& sel = ref.selection;
  sel = p.selection;
  if (!sel.top_p) std::tie(sel.v_budget, sel.s_budget) = p.budgets.at(layer);
  ref.per_batch.resize(size_t(B));
  for (auto& x : ref.per_batch) x.mode = kernels::SparseMode::vertical_slash, x.vertical_slash.resize(size_t(ref.heads));
  ref.scores.resize(size_t(B * ref.heads));
  for (int64_t b = 0; b < B; ++b)
    for (const auto& [head_begin, members] : groups) {
      const int H = members.begin()->second->heads;
      for (int h = 0; h < H; ++h) {
        const int gh = head_begin + h;
        std::vector<float> q(size_t(kQ * D)), qe(q.size(), 0.f);
        for (int64_t r = 0; r < kQ; ++r)
          for (int64_t d = 0; d < D; ++d) {
            q[size_t(r * D + d)] = src.value(InputTensor::q, b, S - kQ + r, gh, d);
            if (src.error) qe[size_t(r * D + d)] = src.error(InputTensor::q, b, S - kQ + r, gh, d);
          }
        // Per member: the scores and each logit's bound.
        std::vector<std::vector<float>> qk, err;
        for (const auto& [first, pass] : members) {
          const int64_t N = int64_t(pass->kpos.size());
          std::vector<float> k(size_t(N * D)), ke(k.size(), 0.f), out(size_t(kQ * N)), eo(out.size(), 0.f);
          for (int64_t j = 0; j < N; ++j)
            for (int64_t d = 0; d < D; ++d) {
              k[size_t(j * D + d)] = src.value(InputTensor::k, b, pass->kpos[size_t(j)], gh / group, d);
              if (src.error) ke[size_t(j * D + d)] = src.error(InputTensor::k, b, pass->kpos[size_t(j)], gh / group, d);
            }
          alg::scores(q, k, pass->kpos, S, int(D), out);
          if (src.error)
            for (int64_t r = 0; r < kQ; ++r)
              for (int64_t j = 0; j < N; ++j) {
                if (!std::isfinite(out[size_t(r * N + j)])) continue;
                double a = 0;  // |q' k' - q k| <= sum qe |k| + |q| ke + qe ke
                for (int64_t d = 0; d < D; ++d) {
                  const double x = q[size_t(r * D + d)], y = k[size_t(j * D + d)];
                  const double ex = qe[size_t(r * D + d)], ey = ke[size_t(j * D + d)];
                  a += ex * std::abs(y) + std::abs(x) * ey + ex * ey;
                }
                eo[size_t(r * N + j)] = float(rounded(out[size_t(r * N + j)], a * scale));
              }
          qk.push_back(std::move(out)), err.push_back(std::move(eo));
        }
        if (sel.top_p) {
          std::vector<float> maxes, sums;
          size_t c = 0;
          for (const auto& [first, pass] : members) {
            std::vector<float> mx(static_cast<size_t>(kQ));
            alg::row_max(qk[c++], int64_t(pass->kpos.size()), mx);
            maxes.insert(maxes.end(), mx.begin(), mx.end());
          }
          const auto gmax = alg::combine_max(maxes, kQ);
          c = 0;
          for (const auto& [first, pass] : members) {
            std::vector<float> sm(static_cast<size_t>(kQ));
            alg::exp_rows(qk[c++], int64_t(pass->kpos.size()), gmax, sm);
            sums.insert(sums.end(), sm.begin(), sm.end());
          }
          const auto gsum = alg::combine_sum(sums, kQ);
          c = 0;
          for (const auto& [first, pass] : members) alg::normalize(qk[c++], int64_t(pass->kpos.size()), gsum);
          // A probability exp(l - m) / sum: log-error at most its logit's bound plus the
          // row's largest (the sum's), and then its four roundings (exp, the two sums, the
          // division) may each fall the other way.
          if (src.error) {
            std::vector<double> worst(size_t(kQ), 0.0);
            for (size_t mi = 0; mi < err.size(); ++mi)
              for (size_t i = 0; i < err[mi].size(); ++i)
                worst[i / (err[mi].size() / size_t(kQ))] = std::max(worst[i / (err[mi].size() / size_t(kQ))], double(err[mi][i]));
            for (size_t mi = 0; mi < err.size(); ++mi) {
              const size_t n = err[mi].size() / size_t(kQ);
              for (size_t i = 0; i < err[mi].size(); ++i) {
                const double w = worst[i / n];
                err[mi][i] = w > 0 ? float((std::expm1(double(err[mi][i]) + w) + 4 * kUlp) * qk[mi][i]) : 0.f;
              }
            }
          }
        }
        std::vector<std::vector<float>> cols, dias, col_err, dia_err;
        std::vector<std::span<const int32_t>> kp;
        std::vector<int64_t> dmin;
        size_t c = 0;
        for (const auto& [first, pass] : members) {
          const int64_t N = int64_t(pass->kpos.size()), W = N + kQ - 1;
          std::vector<float> col(static_cast<size_t>(N)), dia(static_cast<size_t>(W));
          alg::columns(qk[c], N, pass->kpos, sel, col);
          alg::diagonals(qk[c], N, pass->kpos, sel, dia);
          std::vector<float> ce(static_cast<size_t>(N), 0.f), de(static_cast<size_t>(W), 0.f);
          if (src.error) {
            const int64_t d0 = alg::diagonal_min(S, pass->kpos[0], N);
            std::vector<double> cs(ce.size(), 0.0), ds(de.size(), 0.0);
            for (int64_t r = 0; r < kQ; ++r)
              for (int64_t j = 0; j < N; ++j) {
                const double x = err[c][size_t(r * N + j)];
                cs[size_t(j)] += x;
                const int64_t d = (S - kQ + r) - pass->kpos[size_t(j)];
                if (d >= 0) ds[size_t(d - d0)] += x;
              }
            for (size_t j = 0; j < ce.size(); ++j) ce[j] = std::isfinite(col[j]) ? float(rounded(col[j], cs[j])) : 0.f;
            for (size_t i = 0; i < de.size(); ++i) de[i] = std::isfinite(dia[i]) ? float(rounded(dia[i], ds[i])) : 0.f;
          }
          ++c;
          cols.push_back(std::move(col)), dias.push_back(std::move(dia));
          col_err.push_back(std::move(ce)), dia_err.push_back(std::move(de));
          kp.push_back(pass->kpos);
          dmin.push_back(alg::diagonal_min(S, pass->kpos[0], N));
        }
        std::vector<std::span<const float>> cs(cols.begin(), cols.end()), ds(dias.begin(), dias.end()),
            ces(col_err.begin(), col_err.end()), des(dia_err.begin(), dia_err.end());
        ReferenceIndex::Scores& sc = ref.scores[size_t(b * ref.heads + gh)];
        sc.v = alg::vertical_scores(cs, kp, sel);
        sc.s = alg::slash_scores(ds, dmin, sel);
        // The bounds go through the same placement (partials at the root add in double:
        // exact, so their bounds add); where there is no candidate, 0.
        sc.v_error = alg::vertical_scores(ces, kp, sel);
        sc.s_error = alg::slash_scores(des, dmin, sel);
        for (auto* v : {&sc.v_error, &sc.s_error})
          for (double& x : *v) x = std::isfinite(x) ? x : 0.0;
        ref.per_batch[size_t(b)].vertical_slash[size_t(gh)] =
            alg::to_vertical_slash(alg::pick_verticals(sc.v, sel, gh), alg::pick_slashes(sc.s, sel, gh), S);
      }
    }
  return ref;
}

namespace {
int32_t take(std::string_view& in) {
  int32_t x = 0;
  if (in.size() < sizeof x) throw std::runtime_error("built index: truncated message");
  std::memcpy(&x, in.data(), sizeof x);
  in.remove_prefix(sizeof x);
  return x;
}
std::vector<int32_t> take_list(std::string_view& in) {
  const int32_t n = take(in);
  if (n < 0 || size_t(n) > in.size() / sizeof(int32_t)) throw std::runtime_error("built index: bad list length");
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = take(in);
  return v;
}
}  // namespace

BuiltIndex unpack_built_index(const std::vector<std::string>& packed, int64_t batch, int heads) {
  BuiltIndex out;
  out.per_batch.resize(size_t(batch));
  for (auto& x : out.per_batch) x.mode = kernels::SparseMode::vertical_slash, x.vertical_slash.resize(size_t(heads));
  std::vector<char> seen(size_t(batch * heads), 0), differs(seen.size(), 0);
  for (const std::string& msg : packed) {
    std::string_view in(msg);
    while (!in.empty()) {  // one rank may hold several passes (emulated ranks)
      const int32_t begin = take(in), nb = take(in), n = take(in);
      if (nb != batch || begin < 0 || n < 0 || begin + n > heads)
        throw std::runtime_error(fmt::format("built index: heads {}..{} of batch {} do not fit {} heads, batch {}", begin,
                                             begin + n - 1, nb, heads, batch));
      for (int32_t b = 0; b < nb; ++b)
        for (int32_t h = begin; h < begin + n; ++h) {
          kernels::VerticalSlash got;
          got.verticals = take_list(in);
          got.slashes = take_list(in);
          const size_t at = size_t(b) * size_t(heads) + size_t(h);
          kernels::VerticalSlash& slot = out.per_batch[size_t(b)].vertical_slash[size_t(h)];
          if (!seen[at]) slot = std::move(got), seen[at] = 1;
          else if (got.verticals != slot.verticals || got.slashes != slot.slashes) differs[at] = 1;
        }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      throw std::runtime_error(fmt::format("built index: no rank reported head {} of batch element {}", i % size_t(heads),
                                           i / size_t(heads)));
  out.disagreements = std::count(differs.begin(), differs.end(), 1);
  return out;
}

PickMatch compare_picks(std::vector<int32_t> got, std::vector<int32_t> want, std::span<const double> score,
                        std::span<const double> bound, bool top_p, int64_t slots, int64_t& ties) {
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  if (got == want) return PickMatch::same;
  const auto n = int64_t(score.size());
  for (int32_t x : got)
    if (x < 0 || x >= n) return PickMatch::wrong;
  std::vector<int32_t> extra, missing;  // picked by the run only, by the reference only
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  auto lo = [&](int64_t x) { return score[size_t(x)] - bound[size_t(x)]; };
  auto hi = [&](int64_t x) { return score[size_t(x)] + bound[size_t(x)]; };
  // Under scores s' within the bounds, a run that keeps k picks keeps x only if s'_x is
  // at least the k-th largest s' (>= the k-th largest lower end), and leaves y out only
  // if s'_y is at most the (k+1)-th largest s' (<= the (k+1)-th largest upper end).
  std::vector<double> los(static_cast<size_t>(n)), his(static_cast<size_t>(n));
  for (int64_t x = 0; x < n; ++x) los[size_t(x)] = lo(x), his[size_t(x)] = hi(x);
  std::sort(los.begin(), los.end(), std::greater<>());
  std::sort(his.begin(), his.end(), std::greater<>());
  const auto k = int64_t(got.size());
  const double kth_lo = k >= 1 && k <= n ? los[size_t(k - 1)] : -std::numeric_limits<double>::infinity();
  const double next_hi = k < n ? his[size_t(k)] : -std::numeric_limits<double>::infinity();
  for (int32_t x : extra)
    if (hi(x) < kth_lo) return PickMatch::wrong;
  for (int32_t x : missing)
    if (lo(x) > next_hi) return PickMatch::wrong;
  // And every pick kept beat every one left out: s'_x >= s'_y.
  double weakest_extra = std::numeric_limits<double>::infinity(), strongest_missing = -weakest_extra;
  for (int32_t x : extra) weakest_extra = std::min(weakest_extra, hi(x));
  for (int32_t y : missing) strongest_missing = std::max(strongest_missing, lo(y));
  if (weakest_extra < strongest_missing) return PickMatch::wrong;
  if (got.size() != want.size()) {
    if (!top_p) return PickMatch::wrong;  // a budget is a count
    // The running share's cut at k: the k best sum to at least the k largest lower
    // ends, the k+1 best to at most the k+1 largest upper ends; the first must be able
    // to lie below p x total, the second at or above it (the total moved by its bound).
    double total = 0, total_bound = 0, low_k = 0, high_next = 0;
    for (int64_t x = 0; x < n; ++x)
      if (std::isfinite(score[size_t(x)])) total += score[size_t(x)], total_bound += bound[size_t(x)];
    int64_t finite = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(los[size_t(i)])) continue;
      if (finite < k) low_k += los[size_t(i)];
      ++finite;
    }
    int64_t taken = 0;
    for (int64_t i = 0; i < n && taken <= k; ++i)
      if (std::isfinite(his[size_t(i)])) high_next += his[size_t(i)], ++taken;
    const bool kth_kept = k == 0 || low_k < index_alg::kTopP * (total + total_bound);
    const bool next_dropped = k >= slots || taken <= k || high_next >= index_alg::kTopP * (total - total_bound);
    if (!kth_kept || !next_dropped) return PickMatch::wrong;
  }
  ties += int64_t(std::max(extra.size(), missing.size()));
  return PickMatch::tie;
}

TensorCheck check_built_index(const ReferenceIndex& ref, const BuiltIndex& built) {
  TensorCheck t;
  t.name = "index";
  int64_t heads = 0, wrong = built.disagreements, ties = 0;
  for (int64_t b = 0; b < ref.batch; ++b)
    for (int h = 0; h < ref.heads; ++h) {
      const auto& want = ref.per_batch[size_t(b)].vertical_slash[size_t(h)];
      const auto& got = built.per_batch.at(size_t(b)).vertical_slash.at(size_t(h));
      const ReferenceIndex::Scores& sc = ref.scores[size_t(b * ref.heads + h)];
      ++heads;
      t.elements += int64_t(want.verticals.size() + want.slashes.size());
      t.max_ref = std::max(t.max_ref, double(want.verticals.size() + want.slashes.size()));
      const bool top_p = ref.selection.top_p;
      const PickMatch v = compare_picks(got.verticals, want.verticals, sc.v, sc.v_error, top_p, ref.selection.v_slots, ties);
      const PickMatch s = compare_picks(got.slashes, want.slashes, sc.s, sc.s_error, top_p, ref.selection.s_slots, ties);
      // Exact inputs: the stages are deterministic, so any difference is wrong.
      wrong += ref.exact ? v != PickMatch::same || s != PickMatch::same : v == PickMatch::wrong || s == PickMatch::wrong;
    }
  t.max_rel_error = double(wrong) / double(std::max<int64_t>(heads, 1));
  t.max_abs_error = double(wrong);
  t.bound = 0;
  if (!ref.exact) t.note = fmt::format("{} near-tie pick{} accepted", ties, ties == 1 ? "" : "s");
  return t;
}

}  // namespace rm::runtime
