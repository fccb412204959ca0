#include "sim/sparsity/sparsity_model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/config/parallel_for.hpp"
#include "sim/sparsity/document_lengths.hpp"
#include "sim/sparsity/index_file.hpp"
#include "sim/sparsity/vs_generator.hpp"

namespace rm::sparsity {

SparsityModel::SparsityModel(std::string name, int layers, int heads, int64_t seq_len, bool dynamic, Heads patterns)
    : name_(std::move(name)), layers_(layers), heads_(heads), seq_len_(seq_len), dynamic_(dynamic), patterns_(std::move(patterns)) {
  // Merge equal masks into one object: pair costs are cached by address, so
  // equal heads (a recorded index file repeating a head, equal budgets drawn
  // alike) are then counted once. Hash buckets, then exact equality.
  for (auto& p : patterns_) {
    if (!p) throw std::invalid_argument("SparsityModel: null head pattern");
    merge(p);
  }
  built_.assign(static_cast<size_t>(std::max(layers_, 0)), 1);
}

SparsityModel::SparsityModel(std::string name, int layers, int heads, int64_t seq_len, bool dynamic, bool sparse, bool causal,
                             std::function<Heads(int, int)> build)
    : name_(std::move(name)), layers_(layers), heads_(heads), seq_len_(seq_len), dynamic_(dynamic), build_(std::move(build)),
      declared_(true), sparse_(sparse), causal_(causal) {
  built_.assign(static_cast<size_t>(std::max(layers_, 0)), 0);
  patterns_.resize(static_cast<size_t>(std::max(layers_, 0)) * static_cast<size_t>(std::max(heads_, 0)));
}

void SparsityModel::merge(std::shared_ptr<const HeadPattern>& p) const {
  auto& bucket = seen_[p->hash()];
  const auto same = std::find_if(bucket.begin(), bucket.end(), [&](const auto& q) { return q == p || *q == *p; });
  if (same != bucket.end()) p = *same;
  else bucket.push_back(p), ++distinct_;
}

void SparsityModel::build_layer(int layer) const {
  auto& done = built_[static_cast<size_t>(layer)];
  if (done) return;
  Heads got = build_(layer, threads_);
  if (got.size() != static_cast<size_t>(heads_)) throw std::logic_error("SparsityModel: a layer builder returned the wrong head count");
  for (int h = 0; h < heads_; ++h) {
    auto& slot = patterns_[static_cast<size_t>(layer) * static_cast<size_t>(heads_) + static_cast<size_t>(h)];
    slot = std::move(got[static_cast<size_t>(h)]);
    if (!slot) throw std::invalid_argument("SparsityModel: null head pattern");
    merge(slot);
  }
  done = 1;
}

int SparsityModel::distinct_heads() const {
  for (int l = 0; l < layers_; ++l) build_layer(l);
  return distinct_;
}

int SparsityModel::layers_built() const { return static_cast<int>(std::count(built_.begin(), built_.end(), 1)); }

const HeadPattern& SparsityModel::head(int layer, int head) const {
  if (layer < 0 || layer >= layers_ || head < 0 || head >= heads_)
    throw std::out_of_range(fmt::format("SparsityModel::head({}, {}) outside {} x {}", layer, head, layers_, heads_));
  build_layer(layer);
  return *patterns_[static_cast<size_t>(layer) * static_cast<size_t>(heads_) + static_cast<size_t>(head)];
}

bool SparsityModel::sparse() const {
  if (declared_) return sparse_;
  for (const auto& p : patterns_)
    if (p->kind() != PatternKind::dense_causal && p->kind() != PatternKind::dense_full) return true;
  return false;
}

bool SparsityModel::causal() const {
  if (declared_) return causal_;
  for (const auto& p : patterns_)
    if (!p->causal()) return false;
  return true;
}

double SparsityModel::block_sparsity(int layer, BlockShape shape) const {
  const HeadPattern dense = causal() ? HeadPattern::dense_causal() : HeadPattern::dense_full();
  const double causal = static_cast<double>(chunk_row_costs(dense, seq_len_, seq_len_, shape)[0].blocks);
  std::map<const HeadPattern*, int64_t> seen;  // shared patterns are counted once
  double computed = 0;
  for (int h = 0; h < heads_; ++h) {
    const HeadPattern& p = head(layer, h);
    auto it = seen.find(&p);
    if (it == seen.end()) it = seen.emplace(&p, chunk_row_costs(p, seq_len_, seq_len_, shape)[0].blocks).first;
    computed += static_cast<double>(it->second);
  }
  return causal == 0 ? 0.0 : 1.0 - computed / (causal * heads_);
}

namespace {

using Patterns = std::vector<std::shared_ptr<const HeadPattern>>;

const std::vector<std::string> kKinds{"dense_causal",   "dense_full", "vertical_slash", "block_sparse",
                                      "sliding_window", "a_shape",    "document_causal", "document_full"};

Patterns all_same(const PatternContext& ctx, HeadPattern p) {
  return Patterns(static_cast<size_t>(ctx.layers * ctx.heads), std::make_shared<const HeadPattern>(std::move(p)));
}

Patterns documents(const JsonReader& r, const PatternContext& ctx, bool causal) {
  std::vector<int64_t> starts = document_starts(r.object("documents"), ctx.seq_len, ctx.seed);
  return all_same(ctx, causal ? HeadPattern::document_causal(std::move(starts)) : HeadPattern::document_full(std::move(starts)));
}

Patterns block_sparse(const JsonReader& r, const PatternContext& ctx) {
  const int64_t block = r.size("block_tokens", 1, 1 << 20);
  const int64_t local = r.integer("local_blocks", 0, kUnbounded);
  const int64_t global = r.integer("global_blocks", 0, kUnbounded);
  const int64_t stride = r.integer_or("stride_blocks", 0, kUnbounded, 0);
  const int64_t blocks = (ctx.seq_len + block - 1) / block;
  std::vector<Interval> diags{{0, local}};
  for (int64_t d = stride; stride > 0 && d < blocks; d += stride) diags.push_back({d, d + 1});
  return all_same(ctx, HeadPattern::block_sparse(block, IntervalSet({{0, global}}), IntervalSet(std::move(diags))));
}

// Budgets scaled to the model's head count (largest remainder), dealt to heads in a seeded order.
std::vector<std::pair<int64_t, int64_t>> deal_budgets(const JsonReader& r, const PatternContext& ctx) {
  std::vector<std::pair<int64_t, int64_t>> kinds;
  std::vector<int64_t> counts;
  for (const auto& b : r.objects("budgets")) {
    kinds.emplace_back(b.integer("vertical", 0, kUnbounded), b.integer("slash", 0, kUnbounded));
    counts.push_back(b.integer("heads", 1, 1 << 30));
    b.finish();
  }
  if (kinds.empty()) r.fail("budgets", "expected at least one budget");
  const int64_t n = int64_t(ctx.layers) * ctx.heads, total = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  std::vector<int64_t> got(counts.size());
  std::vector<std::pair<int64_t, size_t>> rest;
  int64_t dealt = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    got[i] = counts[i] * n / total;
    dealt += got[i];
    rest.emplace_back(-(counts[i] * n % total), i);
  }
  std::sort(rest.begin(), rest.end());
  for (size_t i = 0; dealt < n; ++i, ++dealt) ++got[rest[i % rest.size()].second];
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < kinds.size(); ++i) out.insert(out.end(), static_cast<size_t>(got[i]), kinds[i]);
  Rng rng(mix_seed(ctx.seed, 0xb0d6e7, 0, 0));
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

// The heads of one layer, built on demand (SparsityModel's lazy form): each
// layer draws from its own seeds, so any order of layers gives the same heads.
std::function<Patterns(int, int)> top_p(const JsonReader& r, const PatternContext& ctx, const VsShape& shape) {
  const JsonReader t = r.object("top_p");
  const int64_t max_v = t.integer_or("max_vertical", 0, kUnbounded, 4096);
  const int64_t max_s = t.integer_or("max_slash", 0, kUnbounded, 4096);
  const double spread = t.number_or("head_spread", 0.0, 3.0, 0.5);
  const double share = t.number_or("vertical_share", 0.0, 1.0, 0.3);
  const JsonReader ls = t.object("layer_sparsity");
  const double lo = ls.number("min", 0.0, 1.0), hi = ls.number("max", lo, 1.0), mean = ls.number("mean", lo, hi);
  ls.finish();
  t.finish();
  const auto layer = layer_sparsity_profile(ctx.layers, lo, hi, mean, ctx.seed);
  const int heads = ctx.heads;
  const uint64_t seed = ctx.seed;
  return [=](int l, int threads) {
    // Heads of a layer differ (lognormal weights of mean 1) but average to the layer's density.
    // The layer's own draws come first, in head order; then each head draws from its own seed,
    // so the heads may be built on any number of threads.
    Rng rng(mix_seed(seed, static_cast<uint64_t>(l), 0x7e1, 0));
    std::lognormal_distribution<double> w(0.0, spread);
    std::uniform_real_distribution<double> mix(0.5, 1.5);
    std::vector<double> weight(static_cast<size_t>(heads)), head_share(static_cast<size_t>(heads));
    for (auto& x : weight) x = w(rng);
    for (auto& x : head_share) x = std::min(1.0, share * mix(rng));
    const double norm = std::accumulate(weight.begin(), weight.end(), 0.0) / heads;
    Patterns out(static_cast<size_t>(heads));
    parallel_for(out.size(), threads, [&](size_t h) {
      Rng head_rng(mix_seed(seed, static_cast<uint64_t>(l), static_cast<uint64_t>(h), 0x70b));
      const double density = std::min(1.0, (1.0 - layer[static_cast<size_t>(l)]) * weight[h] / norm);
      out[h] = std::make_shared<const HeadPattern>(density_head(head_rng, shape, density, head_share[h], max_v, max_s));
    });
    return out;
  };
}

// Top-p heads come back as a per-layer builder in `lazy` (and no patterns).
Patterns vertical_slash(const JsonReader& r, const PatternContext& ctx, std::function<Patterns(int, int)>& lazy) {
  VsShape shape;
  shape.seq_len = ctx.seq_len;
  shape.sink_tokens = r.has("sink_tokens") ? r.size("sink_tokens", 0, kUnbounded) : 30;
  shape.local_diagonals = r.has("local_diagonals") ? r.size("local_diagonals", 0, kUnbounded) : 100;
  shape.vertical_spread = parse_spread(r.one_of_or("vertical_positions", {"uniform", "log_uniform"}, "uniform"));
  shape.slash_spread = parse_spread(r.one_of_or("slash_offsets", {"uniform", "log_uniform"}, "log_uniform"));
  const int sources = r.has("budgets") + r.has("top_p") + r.has("index_file");
  if (sources != 1) r.fail("kind", "vertical_slash needs exactly one of \"budgets\", \"top_p\", \"index_file\"");
  if (r.has("top_p")) {
    lazy = top_p(r, ctx, shape);
    return {};
  }
  Patterns out;
  if (r.has("budgets")) {
    const auto budgets = deal_budgets(r, ctx);
    for (int l = 0; l < ctx.layers; ++l)
      for (int h = 0; h < ctx.heads; ++h) {
        Rng rng(mix_seed(ctx.seed, static_cast<uint64_t>(l), static_cast<uint64_t>(h), 0xb0d));
        const auto& [v, s] = budgets[static_cast<size_t>(l * ctx.heads + h)];
        out.push_back(std::make_shared<const HeadPattern>(budget_head(rng, shape, v, s)));
      }
    return out;
  }
  std::filesystem::path file(r.str("index_file"));
  if (file.is_relative() && !ctx.base_dir.empty()) file = std::filesystem::path(ctx.base_dir) / file;
  const IntervalSet sinks({{0, shape.sink_tokens}}), local({{0, shape.local_diagonals}});
  for (const auto& rec : read_index_file(file.string(), ctx.layers, ctx.heads))
    out.push_back(std::make_shared<const HeadPattern>(HeadPattern::vertical_slash(
        rec.verticals.united(sinks).clipped(0, ctx.seq_len), rec.slashes.united(local).clipped(0, ctx.seq_len))));
  return out;
}

}  // namespace

SparsityModel build_sparsity(const nlohmann::json& spec, const std::string& source, const PatternContext& ctx) {
  if (ctx.layers < 1 || ctx.heads < 1 || ctx.seq_len < 1)
    throw ConfigError(fmt::format("{}: $: need layers, heads and seq_len >= 1 (got {}, {}, {})", source, ctx.layers, ctx.heads, ctx.seq_len));
  const JsonReader r(spec, source);
  const std::string name = r.str_or("name", source);
  r.str_or("description", "");
  const std::string kind = r.one_of("kind", kKinds);
  const bool dynamic = r.boolean_or("dynamic", false);
  Patterns patterns;
  std::function<Patterns(int, int)> lazy;
  if (kind == "dense_causal") patterns = all_same(ctx, HeadPattern::dense_causal());
  else if (kind == "dense_full") patterns = all_same(ctx, HeadPattern::dense_full());
  else if (kind == "sliding_window") patterns = all_same(ctx, HeadPattern::sliding_window(r.size("window_tokens", 1, kUnbounded)));
  else if (kind == "a_shape")
    patterns = all_same(ctx, HeadPattern::a_shape(r.size("sink_tokens", 0, kUnbounded), r.size("window_tokens", 1, kUnbounded)));
  else if (kind == "document_causal" || kind == "document_full") patterns = documents(r, ctx, kind == "document_causal");
  else if (kind == "block_sparse") patterns = block_sparse(r, ctx);
  else patterns = vertical_slash(r, ctx, lazy);
  r.finish();
  // Vertical-slash heads are sparse and causal whatever their draws.
  if (lazy) return SparsityModel(name, ctx.layers, ctx.heads, ctx.seq_len, dynamic, true, true, std::move(lazy));
  return SparsityModel(name, ctx.layers, ctx.heads, ctx.seq_len, dynamic, std::move(patterns));
}

}  // namespace rm::sparsity
