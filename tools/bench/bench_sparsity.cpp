// Speed of the sparse-attention workload model on the default experiment:
// 36 layers x 16 heads of a pattern at 512K tokens, W = 32 context ranks,
// 128x64 tiles; times build_sparsity, pair_costs for all heads under the
// stripe (128 tokens), contiguous and zigzag partitions, and chunk_row_costs
// (128-token query chunks against all keys: the balanced partition's input)
// and pair_costs under that balanced partition, on one core.
//   bench_sparsity [pattern.json] [--seq-len N] [--ranks W] [--scale]
// With --vs-partitions: every partition (contiguous, zigzag, stripe of 1, 64,
// 100, 128, 256 tokens, balanced) of the shipped vertical-slash patterns at
// --seq-len (default 1M) x --ranks (default 64), each case timed, with an
// FNV-1a hash of all its (blocks, nnz) to compare builds.
// With --scale: what a full step pays for patterns and pair costs at the
// issue-9 sizes — build_sparsity of the default pattern (36 x 16 heads) at
// 512K and 4M tokens with its distinct head count, then the pair costs a step
// asks for (WorkCache::head_rank_pairs, stripe 128, one head shard) at
// W = 32 (512K and 4M), W = 128 and W = 1024 (4M; W = 1024 on layer 0 only,
// its 16 heads, to keep the run short), each with the number of distinct
// pair-cost evaluations the cache made and a hash of every sum.
// With --dense-family: every dense-family pattern (dense and document
// masks, causal and full) under every partition at 1M tokens x 64 ranks
// (dense_family_cases below), one line and one time per case.
#include <chrono>
#include <cstdint>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "sim/config/embedded_configs.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/placement/context_partition.hpp"
#include "sim/placement/token_partition.hpp"
#include "sim/placement/work_cache.hpp"
#include "sim/sparsity/sparsity_model.hpp"

namespace {

using namespace rm::sparsity;
using Clock = std::chrono::steady_clock;

// CPU time of this process: the figure that matters on a shared machine.
struct Timer {
  std::clock_t cpu = std::clock();
  Clock::time_point wall = Clock::now();
  double cpu_s() const { return double(std::clock() - cpu) / CLOCKS_PER_SEC; }
  std::string str() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f s cpu (%.3f s wall)", double(std::clock() - cpu) / CLOCKS_PER_SEC,
                  std::chrono::duration<double>(Clock::now() - wall).count());
    return buf;
  }
};

nlohmann::json embedded_pattern(const std::string& name) {
  const std::string path = "patterns/" + name + ".json";
  for (const auto& c : rm::embedded_configs())
    if (c.path == path) return rm::parse_json_text(c.text, path);
  throw std::runtime_error(path + " is not embedded");
}

nlohmann::json default_pattern() { return embedded_pattern("topp-synthetic"); }

// pair_costs of every head against `ranks`, with a progress line on a terminal.
void all_heads(const SparsityModel& model, const std::vector<TokenSet>& ranks, const char* what) {
  const bool tty = isatty(STDERR_FILENO);
  int64_t blocks = 0;
  uint64_t hash = 14695981039346656037ull;  // FNV-1a over every pair's (blocks, nnz): equal counts across builds
  auto mix = [&](int64_t v) { hash = (hash ^ static_cast<uint64_t>(v)) * 1099511628211ull; };
  Timer t;
  for (int l = 0; l < model.layers(); ++l) {
    if (tty) std::fprintf(stderr, "\r  %s: layer %d/%d", what, l + 1, model.layers());
    for (int h = 0; h < model.heads(); ++h)
      for (const auto& c : pair_costs(model.head(l, h), ranks, {})) {
        blocks += c.blocks;
        mix(c.blocks), mix(c.nnz);
      }
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  std::printf("  %-30s %s  (blocks %lld, hash %016llx)\n", what, t.str().c_str(), static_cast<long long>(blocks),
              static_cast<unsigned long long>(hash));
}

// Section 6 of issue 8: every partition of the vertical-slash patterns.
void vertical_slash_partitions(int64_t seq_len, int w) {
  for (const char* name : {"topp-synthetic", "qwen2.5-3b-static"}) {
    Timer build;
    const SparsityModel model = build_sparsity(embedded_pattern(name), name, {36, 16, 2, seq_len, 1, ""});
    std::printf("%s, %d x %d heads, %lld tokens, W = %d (build_sparsity %s):\n", name, model.layers(), model.heads(),
                static_cast<long long>(seq_len), w, build.str().c_str());
    all_heads(model, rm::placement::simple_partition(rm::Partition::contiguous, seq_len, w, 128), "contiguous");
    all_heads(model, rm::placement::simple_partition(rm::Partition::zigzag, seq_len, w, 128), "zigzag");
    for (int64_t g : {1, 64, 100, 128, 256}) {
      // Stripes must tile the sequence: a 100-token stripe uses the largest multiple of W x 100 tokens.
      const int64_t n = seq_len / (w * g) * (w * g);
      const std::string what = "stripe " + std::to_string(g) + (n == seq_len ? "" : " (" + std::to_string(n) + " tokens)");
      all_heads(model, rm::placement::simple_partition(rm::Partition::stripe, n, w, g), what.c_str());
    }
    Timer t;
    std::vector<double> work(static_cast<size_t>(seq_len / 128), 0.0);
    uint64_t hash = 14695981039346656037ull;
    for (int l = 0; l < model.layers(); ++l)
      for (int h = 0; h < model.heads(); ++h)
        for (size_t i = 0; const auto& c : chunk_row_costs(model.head(l, h), seq_len, 128, {})) {
          work[i++] += double(c.blocks);
          hash = (hash ^ static_cast<uint64_t>(c.blocks)) * 1099511628211ull;
          hash = (hash ^ static_cast<uint64_t>(c.nnz)) * 1099511628211ull;
        }
    std::printf("  %-30s %s  (chunk_row_costs, the balanced partition's input; hash %016llx)\n", "balanced",
                t.str().c_str(), static_cast<unsigned long long>(hash));
    all_heads(model, rm::placement::periodic_partition(seq_len, w, 128, rm::placement::balance_periods(work, w)), "balanced");
  }
}

// The issue-9 scale figures (--scale, see the header).
void scale_figures() {
  struct Case {
    int64_t seq_len;
    int w;
    int layers;  // layers whose pair costs are counted
  };
  const Case cases[] = {{int64_t(1) << 19, 32, 36}, {int64_t(1) << 22, 32, 36}, {int64_t(1) << 22, 128, 36}, {int64_t(1) << 22, 1024, 1}};
  const auto spec = default_pattern();
  int64_t built_len = 0;
  std::unique_ptr<SparsityModel> model;
  for (const Case& c : cases) {
    if (c.seq_len != built_len) {
      Timer build;
      model = std::make_unique<SparsityModel>(build_sparsity(spec, "topp-synthetic", {36, 16, 2, c.seq_len, 1, ""}));
      built_len = c.seq_len;
      const int distinct = model->distinct_heads();  // builds every layer (top-p layers are built on first use)
      std::printf("patterns  S=%-8lld build_sparsity %s  (%d heads, %d distinct)\n", static_cast<long long>(c.seq_len),
                  build.str().c_str(), model->layers() * model->heads(), distinct);
    }
    rm::Experiment e;
    e.parallel.cp = c.w;
    e.parallel.stripe_tokens = 128;
    e.workload.seq_len = c.seq_len;
    e.model.heads = 16;
    e.model.kv_heads = 2;
    rm::placement::WorkCache cache;
    Timer t;
    const auto& ranks = cache.partition(rm::Partition::stripe, e, *model);
    uint64_t hash = 14695981039346656037ull;
    for (int l = 0; l < c.layers; ++l)
      for (const auto& x : cache.head_rank_pairs(*model, l, rm::placement::head_shard(e.model, 1, 0), ranks, {})) {
        hash = (hash ^ static_cast<uint64_t>(x.blocks)) * 1099511628211ull;
        hash = (hash ^ static_cast<uint64_t>(x.nnz)) * 1099511628211ull;
      }
    std::printf("pair costs S=%-8lld W=%-5d stripe 128, %2d layer(s): %s  (%lld distinct evaluations, hash %016llx)\n",
                static_cast<long long>(c.seq_len), c.w, c.layers, t.str().c_str(),
                static_cast<long long>(cache.pair_cost_builds()), static_cast<unsigned long long>(hash));
  }
}

// Every dense-family pattern under every partition: the partition (for
// `balanced`, its chunk-row counts over the model's heads and the period
// deal, as the simulator builds it) and pair_costs of the distinct head
// pattern (dense-family heads share one object, so the simulator counts it
// once). Stripe widths that do not divide seq_len over the ranks run at the
// nearest smaller length that they do.
int dense_family_cases(int64_t seq_len, int w) {
  const char* patterns[] = {"dense-causal", "dense-full", "document-causal", "document-full",
                            "document-causal-capped", "document-causal-histogram"};
  struct Case {
    rm::Partition kind;
    int64_t stripe;
  };
  const Case cases[] = {{rm::Partition::contiguous, 128}, {rm::Partition::zigzag, 128}, {rm::Partition::stripe, 1},
                        {rm::Partition::stripe, 64},      {rm::Partition::stripe, 100}, {rm::Partition::stripe, 128},
                        {rm::Partition::stripe, 256},     {rm::Partition::balanced, 128}, {rm::Partition::balanced, 1}};
  double worst = 0;
  for (const char* name : patterns) {
    for (const Case& c : cases) {
      rm::Experiment e;
      e.parallel.cp = w;
      e.parallel.stripe_tokens = c.stripe;
      e.workload.seq_len = seq_len / (int64_t(w) * c.stripe) * (int64_t(w) * c.stripe);
      const SparsityModel model = build_sparsity(embedded_pattern(name), name, PatternContext{36, 16, 2, e.workload.seq_len, 1, ""});
      Timer t;
      const auto ranks = rm::placement::partition_for(c.kind, e, model);
      int64_t blocks = 0, nnz = 0;
      for (const auto& x : pair_costs(model.head(0, 0), ranks, {})) blocks += x.blocks, nnz += x.nnz;
      const double cpu = t.cpu_s();
      worst = std::max(worst, cpu);
      std::printf("%-26s %-10s stripe %3lld  S=%lld W=%d: %s  (blocks %lld, nnz %lld)\n", name, rm::to_string(c.kind),
                  static_cast<long long>(c.stripe), static_cast<long long>(e.workload.seq_len), w, t.str().c_str(),
                  static_cast<long long>(blocks), static_cast<long long>(nnz));
    }
  }
  std::printf("slowest case: %.3f s cpu\n", worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t seq_len = 0;  // default: 512K (1M with --vs-partitions or --dense-family)
  int w = 0;            // default: 32 (64 with --vs-partitions or --dense-family)
  std::string file;
  bool partitions = false, dense = false, scale = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seq-len") && i + 1 < argc) seq_len = std::stoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--ranks") && i + 1 < argc) w = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--vs-partitions")) partitions = true;
    else if (!std::strcmp(argv[i], "--dense-family")) dense = true;
    else if (!std::strcmp(argv[i], "--scale")) scale = true;
    else file = argv[i];
  }
  try {
    if (partitions) {
      vertical_slash_partitions(seq_len ? seq_len : int64_t(1) << 20, w ? w : 64);
      return 0;
    }
    if (scale) {
      scale_figures();
      return 0;
    }
    if (dense) return dense_family_cases(seq_len ? seq_len : int64_t(1) << 20, w ? w : 64);
    if (!seq_len) seq_len = 524288;
    if (!w) w = 32;
    const auto spec = file.empty() ? default_pattern() : rm::read_json_file(file);
    const PatternContext ctx{36, 16, 2, seq_len, 1, ""};
    Timer build;
    const SparsityModel model = build_sparsity(spec, file.empty() ? "topp-synthetic" : file, ctx);
    std::printf("build_sparsity %s: %d x %d heads at %lld tokens: %s\n", model.name().c_str(), model.layers(),
                model.heads(), static_cast<long long>(seq_len), build.str().c_str());
    double lo = 1, hi = 0, mean = 0;
    for (int l = 0; l < model.layers(); ++l) {
      const double sp = model.block_sparsity(l, {});
      lo = std::min(lo, sp), hi = std::max(hi, sp), mean += sp / model.layers();
    }
    std::printf("block sparsity (128x64): mean %.4f, densest layer %.4f, sparsest %.4f\n", mean, lo, hi);
    for (rm::Partition kind : {rm::Partition::stripe, rm::Partition::contiguous, rm::Partition::zigzag}) {
      const auto ranks = rm::placement::simple_partition(kind, seq_len, w, 128);
      int64_t blocks = 0, nnz = 0;
      Timer t;
      for (int l = 0; l < model.layers(); ++l)
        for (int h = 0; h < model.heads(); ++h)
          for (const auto& c : pair_costs(model.head(l, h), ranks, {})) blocks += c.blocks, nnz += c.nnz;
      std::printf("pair_costs %-10s W=%d, all %d heads: %s  (blocks %lld, nnz %lld)\n", rm::to_string(kind), w,
                  model.layers() * model.heads(), t.str().c_str(), static_cast<long long>(blocks), static_cast<long long>(nnz));
    }
    {
      const int64_t chunk = 128;
      int64_t blocks = 0, nnz = 0;
      std::vector<double> work(static_cast<size_t>((seq_len + chunk - 1) / chunk), 0.0);
      uint64_t hash = 14695981039346656037ull;  // FNV-1a over every chunk's (blocks, nnz), to compare builds
      auto mix = [&](int64_t v) { hash = (hash ^ static_cast<uint64_t>(v)) * 1099511628211ull; };
      Timer t;
      for (int l = 0; l < model.layers(); ++l)
        for (int h = 0; h < model.heads(); ++h)
          for (size_t i = 0; const auto& c : chunk_row_costs(model.head(l, h), seq_len, chunk, {})) {
            blocks += c.blocks, nnz += c.nnz;
            mix(c.blocks), mix(c.nnz);
            work[i++] += static_cast<double>(c.blocks);
          }
      std::printf("chunk_row_costs chunk=%lld, all %d heads: %s  (blocks %lld, nnz %lld, hash %016llx)\n",
                  static_cast<long long>(chunk), model.layers() * model.heads(), t.str().c_str(),
                  static_cast<long long>(blocks), static_cast<long long>(nnz), static_cast<unsigned long long>(hash));
      // The balanced partition built from that work, as `ringmaster imbalance` does.
      if (seq_len % (chunk * w) == 0) {
        const auto ranks = rm::placement::periodic_partition(seq_len, w, chunk, rm::placement::balance_periods(work, w));
        uint64_t h2 = 14695981039346656037ull;
        Timer tb;
        for (int l = 0; l < model.layers(); ++l)
          for (int h = 0; h < model.heads(); ++h)
            for (const auto& c : pair_costs(model.head(l, h), ranks, {})) {
              h2 = (h2 ^ static_cast<uint64_t>(c.blocks)) * 1099511628211ull;
              h2 = (h2 ^ static_cast<uint64_t>(c.nnz)) * 1099511628211ull;
            }
        std::printf("pair_costs balanced   W=%d, all %d heads: %s  (hash %016llx)\n", w, model.layers() * model.heads(),
                    tb.str().c_str(), static_cast<unsigned long long>(h2));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sparsity: %s\n", e.what());
    return 1;
  }
  return 0;
}
