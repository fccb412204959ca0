#include "runtime/reference_step.hpp"

#include <stdexcept>

#include "kernels/bf16.hpp"
#include "runtime/dense_layer.hpp"
#include "runtime/dense_math.hpp"
#include "runtime/dense_step.hpp"

namespace rm::runtime {

Model StepProblem::model() const {
  Model m = layer.model();
  m.layers = layers;
  m.vocab = vocab;
  m.tied_embeddings = tied;
  return m;
}

StepResult reference_step(const StepProblem& p, const std::vector<std::vector<float>>* params) {
  if (p.layers < 1) throw std::invalid_argument("reference step: layers must be >= 1 (got " + std::to_string(p.layers) + ")");
  if (p.vocab < 1) throw std::invalid_argument("reference step: vocab must be >= 1 (got " + std::to_string(p.vocab) + ")");
  const Model m = p.model();
  const WeightLayout wl(m);
  const EmbedLayout el(m);
  const int64_t G = p.layer.batch, S = p.layer.seq_len, H = m.hidden, V = p.vocab, rows = G * S;
  const uint64_t seed = p.layer.seed;
  StepResult r;
  r.before.resize(size_t(p.layers + 1));
  for (int l = 0; l < p.layers; ++l) {
    r.before[size_t(l)].resize(size_t(wl.total));
    for (int64_t i = 0; i < wl.total; ++i) r.before[size_t(l)][size_t(i)] = weight_value(wl, seed, l, i);
  }
  std::vector<float>& E = r.before.back();
  E.resize(size_t(el.total));
  for (int64_t i = 0; i < el.total; ++i) E[size_t(i)] = embed_value(el, seed, i);
  if (params) {
    if (params->size() != r.before.size())
      throw std::invalid_argument("reference step: params must hold layers + 1 = " + std::to_string(r.before.size()) + " blocks");
    for (size_t b = 0; b < r.before.size(); ++b) {
      if ((*params)[b].size() != r.before[b].size())
        throw std::invalid_argument("reference step: params block " + std::to_string(b) + " must hold " +
                                    std::to_string(r.before[b].size()) + " values");
      r.before[b] = (*params)[b];  // block by block: E refers to the last one
    }
  }
  std::vector<int32_t> ids(static_cast<size_t>(rows)), targets(static_cast<size_t>(rows));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t s = 0; s < S; ++s)
      ids[size_t(g * S + s)] = token_id(seed, g, s, V), targets[size_t(g * S + s)] = target_id(seed, g, s, V);

  // Forward: x_0 = E[ids], x_{l+1} = layer_l(x_l).
  std::vector<std::vector<float>> x(size_t(p.layers + 1), std::vector<float>(size_t(rows * H)));
  for (int64_t row = 0; row < rows; ++row)
    std::copy_n(E.begin() + el.table + ids[size_t(row)] * H, H, x[0].begin() + row * H);
  LayerProblem lp = p.layer;
  for (int l = 0; l < p.layers; ++l) {
    lp.layer = l, lp.backward = false;
    if (!p.index_by_layer.empty()) lp.index = p.index_by_layer.at(size_t(l));
    x[size_t(l + 1)] = reference_layer(lp, {x[size_t(l)], {}, r.before[size_t(l)]}).y;
  }
  const std::span<const float> wf(E.data() + el.norm, size_t(H));
  std::vector<float> xf(static_cast<size_t>(rows * H)), z(static_cast<size_t>(rows * V));
  rms_norm(x.back(), wf, xf, H);
  sgemm(false, true, rows, V, H, xf.data(), E.data() + el.head, 0.f, z.data());
  r.loss.resize(size_t(rows));
  cross_entropy(z, targets, V, r.loss);

  // Backward.
  r.grad.assign(size_t(p.layers + 1), {});
  std::vector<float>& dE = r.grad.back();
  dE.assign(size_t(el.total), 0.f);
  cross_entropy_backward(z, targets, V, 1.0 / double(rows), z);  // z becomes dlogits
  std::vector<float> dxf(static_cast<size_t>(rows * H)), dx(static_cast<size_t>(rows * H));
  sgemm(false, false, rows, H, V, z.data(), E.data() + el.head, 0.f, dxf.data());
  sgemm(true, false, V, H, rows, z.data(), xf.data(), 1.f, dE.data() + el.head);
  rms_norm_backward(x.back(), wf, dxf, {}, dx, H);
  for (int l = p.layers - 1; l >= 0; --l) {
    lp.layer = l, lp.backward = true;
    if (!p.index_by_layer.empty()) lp.index = p.index_by_layer.at(size_t(l));
    LayerResult lr = reference_layer(lp, {x[size_t(l)], dx, r.before[size_t(l)]});
    dx = std::move(lr.dx);
    r.grad[size_t(l)] = std::move(lr.wgrad);
  }
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t f = 0; f < H; ++f) dE[size_t(el.table + ids[size_t(row)] * H + f)] += dx[size_t(row * H + f)];

  // AdamW's first step from zero moments, on fp32 masters equal to the seeded (bf16-exact) values.
  r.after = r.before;
  for (size_t b = 0; b < r.after.size(); ++b) {
    std::vector<float> mo(r.after[b].size(), 0.f), ve(r.after[b].size(), 0.f);
    adamw_step(r.after[b], mo, ve, r.grad[b], 1);
    for (float& w : r.after[b]) w = kernels::round_bf16(w);
  }
  return r;
}

}  // namespace rm::runtime
