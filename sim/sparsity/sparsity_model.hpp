// The sparse-attention workload model: one HeadPattern per (layer, head),
// built for one sequence length from a pattern spec (configs/patterns/*.json
// or inline; fields in docs/sparsity.md). Counting lives in count.hpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/sparsity/count.hpp"
#include "sim/sparsity/head_pattern.hpp"

namespace rm::sparsity {

struct PatternContext {
  int layers = 0;
  int heads = 0;     // query heads
  int kv_heads = 0;  // for GQA bookkeeping; patterns are per query head
  int64_t seq_len = 0;
  uint64_t seed = 1;
  std::string base_dir;  // index files in the spec are relative to this
};

class SparsityModel {
 public:
  using Heads = std::vector<std::shared_ptr<const HeadPattern>>;
  SparsityModel(std::string name, int layers, int heads, int64_t seq_len, bool dynamic, Heads patterns);
  // Built layer by layer on first use (the top-p calibration: a scope of one
  // layer then draws one layer's heads, not 36). build(l) returns layer l's
  // heads and must not depend on which layers were built before; `sparse`
  // and `causal` are what sparse() and causal() would find over every head.
  // build(l, threads) may spread layer l's heads over `threads` threads (set_threads).
  SparsityModel(std::string name, int layers, int heads, int64_t seq_len, bool dynamic, bool sparse, bool causal,
                std::function<Heads(int layer, int threads)> build);
  // Threads a lazy layer's heads are built on (default 1); the heads do not depend on it.
  void set_threads(int threads) { threads_ = threads; }

  const std::string& name() const { return name_; }
  int layers() const { return layers_; }
  int heads() const { return heads_; }
  int64_t seq_len() const { return seq_len_; }
  // Heads with identical masks share one object (the constructor merges equal
  // ones: hash, then field-by-field equality), so callers may cache costs by
  // &head(l, h): the address is the pattern's canonical id.
  const HeadPattern& head(int layer, int head) const;
  // Distinct pattern objects after merging: how many counts a full step needs per partition (builds every layer).
  int distinct_heads() const;
  // Layers built so far (all of them for an eager model).
  int layers_built() const;
  // True when indices are built online each step (top-k / top-p): schedules add index-building ops.
  bool dynamic() const { return dynamic_; }
  // True when some head's mask is not dense (causal or full): attention runs a sparse-index kernel.
  bool sparse() const;
  // False when some head attends both ways (dense_full, document_full): no op is causally empty.
  bool causal() const;
  // 1 - computed / dense tiles over the whole sequence, summed over the layer's
  // heads; dense is causal, or full when the model is not causal().
  double block_sparsity(int layer, BlockShape shape) const;

 private:
  std::string name_;
  int layers_ = 0;
  int heads_ = 0;
  int64_t seq_len_ = 0;
  bool dynamic_ = false;
  // Lazy layers: patterns_ slots stay null until their layer is built; equal
  // masks are merged across layers as they are built (the first built is
  // the canonical object).
  void build_layer(int layer) const;
  void merge(std::shared_ptr<const HeadPattern>& p) const;
  std::function<Heads(int, int)> build_;
  int threads_ = 1;
  bool declared_ = false, sparse_ = false, causal_ = true;  // flags given by a lazy builder
  mutable std::vector<char> built_;
  mutable std::unordered_map<uint64_t, Heads> seen_;
  mutable int distinct_ = 0;
  mutable Heads patterns_;  // layer-major
};

// Throws rm::ConfigError ("source: $.path: what") on any bad field.
SparsityModel build_sparsity(const nlohmann::json& spec, const std::string& source, const PatternContext& ctx);

}  // namespace rm::sparsity
