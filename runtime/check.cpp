#include "runtime/check.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/bf16.hpp"
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

// ---- the step scope ----------------------------------------------------------------------

namespace {

// The full copies of one parameter block that the ranks hold: each full slice
// alone, and the shards (at > 0 or shorter) assembled into one, each element once.
std::vector<std::vector<float>> copies_of_block(const std::vector<StepOutputs>& ranks, size_t block, bool grad,
                                                size_t total, const std::string& what) {
  std::vector<std::vector<float>> out;
  std::optional<Global> shards;
  for (const StepOutputs& o : ranks) {
    const auto& v = grad ? o.grad.at(block) : o.params.at(block);
    const size_t at = size_t(grad ? o.grad_at.at(block) : o.param_at.at(block));
    if (at == 0 && v.size() == total) {
      out.push_back(v);
      continue;
    }
    if (!shards) shards.emplace(what, total);
    for (size_t i = 0; i < v.size(); ++i) shards->put(at + i, v[i]);
  }
  if (shards) {
    shards->require_covered();
    out.push_back(std::move(shards->got));
  }
  if (out.empty()) throw std::runtime_error(what + ": no rank holds it");
  return out;
}

}  // namespace

CheckReport check_step(const StepProblem& p, const std::vector<StepOutputs>& ranks, double bound) {
  const StepResult ref = reference_step(p);
  const Model m = p.model();
  const WeightLayout w(m);
  const EmbedLayout el(m);
  const size_t S = size_t(p.layer.seq_len), blocks = size_t(p.layers + 1);
  CheckReport r;
  r.bound = bound;
  Global loss("loss", ref.loss.size());
  for (const StepOutputs& o : ranks) {
    if (o.grad.size() != blocks || o.params.size() != blocks)
      throw std::runtime_error(fmt::format("rank {}: its step outputs hold {} parameter blocks; expected {}", o.rank,
                                           o.grad.size(), blocks));
    const size_t T = o.tokens.size();
    for (size_t row = 0; row < o.loss.size(); ++row)
      loss.put((size_t(o.sample_base) + row / T) * S + size_t(o.tokens.at(row % T)), o.loss[row]);
  }
  loss.require_covered();
  r.tensors.push_back(compare("loss", loss.got, ref.loss, bound));

  struct Part {
    const char* grad;
    const char* update;
    bool embed;
    int64_t at, n;
  };
  std::vector<Part> parts{{"dW_qkv", "W_qkv'", false, w.qkv, w.hidden * w.qkv_width()},
                          {"dW_o", "W_o'", false, w.o, w.q * w.hidden},
                          {"dW_gu", "W_gu'", false, w.gu, w.hidden * 2 * w.inter},
                          {"dW_down", "W_down'", false, w.down, w.inter * w.hidden},
                          {"dE", "E'", true, el.table, el.vocab * el.hidden},
                          {"", "norm1'", false, w.norm1, w.hidden},  // the norm weights: no gradient, decay only
                          {"", "norm2'", false, w.norm2, w.hidden},
                          {"", "norm_f'", true, el.norm, el.hidden}};
  if (!el.tied) parts.push_back({"dW_head", "W_head'", true, el.head, el.vocab * el.hidden});
  // Per block: every copy of its gradient and parameters.
  std::vector<std::vector<std::vector<float>>> grads(blocks), params(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t total = b + 1 == blocks ? size_t(el.total) : size_t(w.total);
    const std::string which = b + 1 == blocks ? "the embedding's" : fmt::format("layer {}'s", b);
    grads[b] = copies_of_block(ranks, b, true, total, which + " gradient");
    params[b] = copies_of_block(ranks, b, false, total, which + " parameters");
  }
  for (const Part& part : parts) {
    TensorCheck g{part.grad, 0}, u{part.update, 0};
    g.bound = bound * kStepGradientFactor, u.bound = kUpdateBound;
    for (size_t b = 0; b < blocks; ++b) {
      if ((b + 1 == blocks) != part.embed) continue;
      const auto first = size_t(part.at), last = size_t(part.at + part.n);
      g.elements += part.n, u.elements += part.n;
      const std::vector<float> want(ref.grad[b].begin() + long(first), ref.grad[b].begin() + long(last));
      for (const auto& got : *part.grad ? grads[b] : std::vector<std::vector<float>>{}) {
        const TensorCheck one = compare(part.grad, std::vector<float>(got.begin() + long(first), got.begin() + long(last)),
                                        want, g.bound);
        g.max_abs_error = std::max(g.max_abs_error, one.max_abs_error);
        g.max_ref = std::max(g.max_ref, one.max_ref);
      }
      // AdamW's first step from w0 on the gradient the rank reduced: the same arithmetic on
      // the same bf16 values, so a correct run matches it exactly.
      for (size_t c = 0; c < params[b].size(); ++c) {
        const auto& grad = grads[b][std::min(c, grads[b].size() - 1)];
        std::vector<float> want_w(ref.before[b].begin() + long(first), ref.before[b].begin() + long(last)),
            m0(want_w.size(), 0.f), v0(want_w.size(), 0.f);
        adamw_step(want_w, m0, v0, std::span<const float>(grad).subspan(first, last - first), 1);
        for (size_t i = 0; i < want_w.size(); ++i) {
          want_w[i] = kernels::round_bf16(want_w[i]);
          const double err = std::abs(double(params[b][c][first + i]) - want_w[i]);
          u.max_abs_error = std::max(u.max_abs_error, std::isfinite(err) ? err : INFINITY);
          u.max_ref = std::max(u.max_ref, std::abs(double(want_w[i]) - ref.before[b][first + i]));
        }
      }
    }
    u.max_rel_error = u.max_abs_error / std::max(u.max_ref, 1e-30);
    g.max_rel_error = g.max_abs_error / std::max(g.max_ref, 1e-30);
    if (*part.grad) r.tensors.push_back(g);
    r.tensors.push_back(u);
  }
  return r;
}

}  // namespace rm::runtime
