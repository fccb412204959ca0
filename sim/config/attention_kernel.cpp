#include "sim/config/attention_kernel.hpp"

#include <fmt/format.h>

namespace rm {

namespace {

const EnumName<KernelWork> kWorks[] = {{KernelWork::allowed_pairs, "allowed_pairs"}, {KernelWork::tiles, "tiles"}};

// [[tokens, tflops], ...]: tokens strictly increasing, rates in (0, the GPU's peak].
// `gpu` is null for other GPUs' entries: checked for shape, not against this peak.
RateCurve parse_curve(const JsonReader& r, std::string_view key, const GpuSpec* gpu) {
  const auto& v = r.value(key);
  const char* shape = "expected a non-empty array of [tokens, tflops] pairs";
  if (!v.is_array() || v.empty()) r.fail(key, shape);
  RateCurve out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string k = fmt::format("{}[{}]", key, i);
    const auto& p = v[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) r.fail(k, shape);
    const RatePoint pt{p[0].get<double>(), p[1].get<double>()};
    if (pt.tokens < 1) r.fail(k, fmt::format("expected tokens >= 1, got {}", pt.tokens));
    if (!out.empty() && pt.tokens <= out.back().tokens)
      r.fail(k, fmt::format("expected tokens above the previous point's {}, got {}", out.back().tokens, pt.tokens));
    if (pt.tflops <= 0) r.fail(k, fmt::format("expected TFLOP/s above 0, got {}", pt.tflops));
    if (gpu && pt.tflops > gpu->peak_tflops_bf16)
      r.fail(k, fmt::format("expected at most the {}'s peak of {} TFLOP/s, got {}", gpu->model, gpu->peak_tflops_bf16,
                            pt.tflops));
    out.push_back(pt);
  }
  return out;
}

}  // namespace

const char* to_string(KernelWork w) { return name_of(kWorks, w); }

AttentionKernel parse_attention_kernel(const JsonReader& r, const GpuSpec& gpu) {
  AttentionKernel k;
  k.name = r.str("name");
  k.work = r.enum_of("work", kWorks);
  k.sparse_index = r.boolean_or("sparse_index", false);
  std::vector<std::string> listed;
  bool found = false;
  for (const JsonReader& g : r.objects("gpus")) {
    const auto& models = g.value("models");
    if (!models.is_array() || models.empty()) g.fail("models", "expected a non-empty array of GPU model names");
    bool match = false;
    for (const auto& m : models) {
      if (!m.is_string()) g.fail("models", "expected GPU model names (strings)");
      listed.push_back(m.get<std::string>());
      match = match || m.get<std::string>() == gpu.model;
    }
    const bool pick = match && !found;  // the first entry listing the GPU applies
    const GpuSpec* check = pick ? &gpu : nullptr;
    AttentionKernel e;
    e.source = g.str("source");
    auto f = g.object("fwd_tflops");
    e.fwd_full = parse_curve(f, "full", check);
    e.fwd_causal = parse_curve(f, "causal", check);
    f.finish();
    auto b = g.object("bwd_tflops");
    e.bwd_full = parse_curve(b, "full", check);
    e.bwd_causal = parse_curve(b, "causal", check);
    b.finish();
    g.finish();
    if (!pick) continue;
    found = true;
    k.source = e.source;
    k.fwd_full = std::move(e.fwd_full);
    k.fwd_causal = std::move(e.fwd_causal);
    k.bwd_full = std::move(e.bwd_full);
    k.bwd_causal = std::move(e.bwd_causal);
  }
  if (!found)
    r.fail("gpus", fmt::format("no entry for GPU {} (entries for: {})", gpu.model, fmt::join(listed, ", ")));
  r.finish();
  return k;
}

AttentionKernel load_attention_kernel(const ConfigStore& store, const std::string& name, const GpuSpec& gpu) {
  const LoadedConfig c = store.load("kernels", name, "attention kernel");
  return parse_attention_kernel(JsonReader(c.json, c.source), gpu);
}

}  // namespace rm
