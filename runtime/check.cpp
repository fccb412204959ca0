#include "runtime/check.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/reference.hpp"
#include "runtime/reference_layer.hpp"

namespace rm::runtime {

using schedule::BufferRole;

bool CheckReport::passed() const {
  for (const auto& t : tensors)
    if (!t.passed()) return false;
  return !tensors.empty();
}

namespace {

// One global tensor being assembled: values and how many slices wrote each element.
struct Global {
  std::string name;
  std::vector<float> got;
  std::vector<uint8_t> seen;
  explicit Global(std::string n, size_t size) : name(std::move(n)), got(size, 0.f), seen(size, 0) {}
  void put(size_t at, float v) {
    if (at >= got.size()) throw std::runtime_error(name + ": an output element lies outside the problem");
    if (seen[at]++) throw std::runtime_error(fmt::format("{}: element {} is held by two ranks' outputs", name, at));
    got[at] = v;
  }
  void require_covered() const {
    size_t missing = 0;
    for (uint8_t s : seen) missing += s == 0;
    if (missing)
      throw std::runtime_error(fmt::format("{}: the ranks' outputs leave {} of {} elements uncovered", name, missing, seen.size()));
  }
};

TensorCheck compare(const std::string& name, const std::vector<float>& got, const std::vector<float>& want,
                    double bound) {
  TensorCheck t{name, int64_t(want.size())};
  t.bound = bound;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], g = got[i];
    if (std::isinf(w) && std::isinf(g) && (w < 0) == (g < 0)) continue;  // rows that see no key: -inf in both
    t.max_ref = std::max(t.max_ref, std::isfinite(w) ? std::abs(w) : 0.0);
    const double err = std::isfinite(w) && std::isfinite(g) ? std::abs(g - w) : INFINITY;
    t.max_abs_error = std::max(t.max_abs_error, err);
  }
  t.max_rel_error = t.max_abs_error / std::max(t.max_ref, 1e-30);
  return t;
}

}  // namespace

CheckReport check_attention(const CheckProblem& p, const std::vector<OutputSlice>& slices, double bound) {
  ReferenceProblem rp;
  rp.batch = p.batch;
  rp.seq_len = int32_t(p.seq_len);
  rp.heads = p.heads, rp.kv_heads = p.kv_heads, rp.head_dim = p.head_dim;
  rp.causal = p.causal, rp.seed = p.seed, rp.backward = p.backward;
  rp.index = p.index;
  rp.per_batch = p.per_batch;
  return check_attention_against(p, slices, reference_attention(rp), bound);
}

CheckReport check_attention_against(const CheckProblem& p, const std::vector<OutputSlice>& slices,
                                    const ReferenceResult& ref, double bound) {
  const size_t B = size_t(p.batch), S = size_t(p.seq_len), H = size_t(p.heads), KVH = size_t(p.kv_heads),
               D = size_t(p.head_dim);
  Global o("O", B * H * S * D), lse("LSE", B * H * S), dq("dQ", B * H * S * D), dk("dK", B * KVH * S * D),
      dv("dV", B * KVH * S * D);
  for (const auto& x : slices) {
    const Layout& l = x.layout;
    const int parts = l.kv_like() ? 2 : 1;
    const size_t heads = l.content == BufferRole::dkv ? KVH : H;
    for (int part = 0; part < parts; ++part)
      for (int64_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < l.heads.size(); ++h)
          for (size_t t = 0; t < l.tokens.size(); ++t) {
            const int64_t row = l.row(part, b, int64_t(h), int64_t(t), p.batch);
            const size_t g = (size_t(b) * heads + size_t(l.heads[h])) * S + size_t(l.tokens[t]);
            if (size_t(l.heads[h]) >= heads || size_t(l.tokens[t]) >= S)
              throw std::runtime_error("an output slice lies outside the problem");
            if (l.content == BufferRole::lse) {
              lse.put(g, x.values.at(size_t(row)));
              continue;
            }
            Global& dst = l.content == BufferRole::o ? o : l.content == BufferRole::dq ? dq : part == 0 ? dk : dv;
            for (size_t d = 0; d < D; ++d) dst.put(g * D + d, x.values.at(size_t(row) * D + d));
          }
  }
  CheckReport r;
  r.bound = bound;
  std::vector<std::pair<Global*, const std::vector<float>*>> all{{&o, &ref.o}, {&lse, &ref.lse}};
  if (p.backward) all.insert(all.end(), {{&dq, &ref.dq}, {&dk, &ref.dk}, {&dv, &ref.dv}});
  for (auto [g, want] : all) {
    g->require_covered();
    const bool tight = (g == &lse && p.tight_lse) || (g == &dv && p.tight_dv);
    r.tensors.push_back(compare(g->name, g->got, *want, tight ? std::min(bound, kFp32PathBound) : bound));
  }
  return r;
}

LayerProblem layer_problem(const CheckProblem& p) {
  LayerProblem lp;
  lp.batch = p.batch, lp.seq_len = int32_t(p.seq_len), lp.hidden = p.hidden, lp.intermediate = p.intermediate;
  lp.heads = p.heads, lp.kv_heads = p.kv_heads, lp.head_dim = p.head_dim;
  lp.causal = p.causal, lp.backward = p.backward, lp.seed = p.seed, lp.layer = p.layer_index, lp.index = p.index;
  return lp;
}

CheckReport check_layer(const CheckProblem& p, const std::vector<OutputSlice>& slices,
                        const std::vector<DenseOutputs>& dense, double bound) {
  const LayerProblem lp = layer_problem(p);
  const LayerResult ref = reference_layer(lp, seeded_layer_inputs(lp));
  CheckReport r = check_attention_against(p, slices, ref.attention, bound);
  // Dense rows: rank row b x T + t is global row b x S + tokens[t].
  const size_t H = size_t(p.hidden), S = size_t(p.seq_len), B = size_t(p.batch);
  Global y("y", B * S * H), dx("dx", B * S * H);
  std::vector<float> wgrad(p.backward ? ref.wgrad.size() : 0, 0.f);
  for (const DenseOutputs& d : dense) {
    const size_t T = d.tokens.size();
    if (d.layer != p.layer_index || (p.backward && d.wgrad.size() != wgrad.size()) || d.y.size() != B * T * H)
      throw std::runtime_error(fmt::format("rank {}: its dense outputs do not match layer {}", d.rank, p.layer_index));
    for (size_t row = 0; row < B * T; ++row)
      for (size_t f = 0; f < H; ++f) {
        const size_t g = ((row / T) * S + size_t(d.tokens[row % T])) * H + f;
        y.put(g, d.y[row * H + f]);
        if (p.backward) dx.put(g, d.dx.at(row * H + f));
      }
    for (size_t i = 0; i < wgrad.size(); ++i) wgrad[i] += d.wgrad[i];
  }
  y.require_covered();
  r.tensors.push_back(compare("y", y.got, ref.y, bound));
  if (!p.backward) return r;
  dx.require_covered();
  r.tensors.push_back(compare("dx", dx.got, ref.dx, bound));
  const WeightLayout w(lp.model());
  auto part = [&](const char* name, int64_t at, int64_t n) {
    const auto first = size_t(at), last = size_t(at + n);
    r.tensors.push_back(compare(name, std::vector<float>(wgrad.begin() + long(first), wgrad.begin() + long(last)),
                                std::vector<float>(ref.wgrad.begin() + long(first), ref.wgrad.begin() + long(last)), bound));
  };
  part("dW_qkv", w.qkv, w.hidden * w.qkv_width());
  part("dW_o", w.o, w.q * w.hidden);
  part("dW_gu", w.gu, w.hidden * 2 * w.inter);
  part("dW_down", w.down, w.inter * w.hidden);
  return r;
}

}  // namespace rm::runtime
