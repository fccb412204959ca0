// An experiment: cluster + model + workload + parallelisation + scope, loaded
// strictly from JSON (configs/experiments/), with `--set path=value`
// overrides applied before validation. The keys of DESIGN.md's "Experiment
// keys everyone relies on" table are the stable names used here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/attention_kernel.hpp"
#include "sim/config/cluster.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/model.hpp"

namespace rm {

enum class Partition { contiguous, zigzag, stripe, balanced };
enum class RingKind { ring, double_ring, hierarchical };
enum class PlacementOrder { head_first, context_first, interleaved };
enum class Checkpoint { none, full, selective };
enum class Scope { attention_fwd, attention_fwd_bwd, layer, step };
// Where the stripe / zigzag token order comes from: an exchange inside every
// attention call (MTraining) or the data loader (ring-flash-attention, Megatron).
enum class ShuffleMode { per_call, once };
// Wire dtype of dK/dV in the ring backward (and of their accumulators).
enum class GradDtype { fp32, bf16 };
// The order a flat ring visits its context ranks (docs/generators.md, "Ring order").
enum class RingOrder { rank, zigzag_pairs, topology };

const char* to_string(Partition p);
const char* to_string(RingKind r);
const char* to_string(PlacementOrder p);
const char* to_string(Checkpoint c);
const char* to_string(Scope s);
const char* to_string(ShuffleMode m);
const char* to_string(GradDtype d);
const char* to_string(RingOrder o);
std::optional<Partition> partition_from_string(std::string_view s);

struct Workload {
  int64_t seq_len = 0;
  int batch = 1;
  nlohmann::json pattern;       // the pattern spec, inlined
  std::string pattern_source;   // where it came from, for error messages
  std::string pattern_base_dir; // index files named in the pattern resolve against it
  int64_t block_q = 128;        // kernel tile, query rows
  int64_t block_k = 64;         // kernel tile, key columns
  uint64_t seed = 1;            // pattern generators and random inputs
};

struct Parallel {
  int dp = 1, hp = 1, cp = 1;
  int tp = 1;  // Megatron tensor parallel (with sequence parallelism): tp GPUs in one node per (dp, hp, cp) rank
  Partition partition = Partition::contiguous;
  int64_t stripe_tokens = 128;
  RingKind ring = RingKind::ring;
  int window = 1;  // double-ring window w (context ranks per inner ring)
  PlacementOrder placement = PlacementOrder::head_first;
  Checkpoint checkpoint = Checkpoint::full;
  int zero_stage = 1;  // ZeRO stage of the data-parallel optimizer (0..3)
  ShuffleMode shuffle = ShuffleMode::per_call;
  GradDtype grad_comm_dtype = GradDtype::fp32;
  RingOrder ring_order = RingOrder::rank;
  // Tokens per pass of the LM head + cross-entropy (checkpointed chunks, MTraining's
  // 1,024); 0 = all local tokens at once. Memory only (docs/memory.md).
  int64_t loss_chunk_tokens = 1024;
  // GPUs used: every (dp, hp, cp) rank is a tensor-parallel group of tp GPUs.
  int world() const { return dp * tp * hp * cp; }
  // Ranks that hold a replica of the same weight shard (gradients are reduced over them).
  int replicas() const { return dp * hp * cp; }
};

struct Experiment {
  std::string name;
  std::string source;  // the file it came from, or "<embedded>/experiments/..."
  Cluster cluster;
  Model model;
  Workload workload;
  Parallel parallel;
  AttentionKernel kernel;  // kernel.attention, its entry for the cluster's GPU
  std::string kernel_choice;  // "named by the experiment", or why the default (sim/config/kernel_default.hpp)
  std::vector<std::string> warnings;  // one line each, for stderr: e.g. a dense mask on block_sparse
  Scope scope = Scope::step;
  int scope_layer = 0;  // the decoder layer that attention_fwd, attention_fwd_bwd and layer scopes simulate
  nlohmann::json resolved;  // the whole experiment with cluster, model and pattern inlined
};

// The experiment as it was resolved, in the keys of an experiment file, the
// named parts (cluster, model, pattern) by name and every workload and parallel
// key with its value after defaults: what `simulate --json` echoes so a result
// can be traced to its inputs. Adds gpus_used and gpus_in_cluster.
nlohmann::json summary_json(const Experiment& e);

// The pattern's name (its "name", else where it came from) and its kind ("dense_causal", ...).
std::string pattern_name(const Workload& w);
std::string pattern_kind(const Workload& w);

// The name of the experiment embedded as the default (configs/experiments/).
inline constexpr const char* kDefaultExperiment = "mtraining-qwen2.5-3b-512k";

// Applies one "a.b.c=value" override to an experiment JSON. Values parse as JSON
// when they can ("8", "true", "{...}"), else as strings ("512k", "zigzag"). Named
// cluster/model/pattern references on the way are inlined first, so
// "cluster.nodes=2" works when cluster is a name.
void apply_override(nlohmann::json& experiment, const std::string& assignment, const ConfigStore& store,
                    const std::string& base_dir);

// For each override's key, the value it replaced: what `file` (or the embedded
// default) holds there before any override, named parts on the way inlined;
// null where the file has no such key (the parser's default applies). What
// `diff` shows for a run of the same file that did not set the key.
nlohmann::json override_bases(const ConfigStore& store, const std::string& file,
                              const std::vector<std::string>& overrides);

// Loads `file` (or the embedded default when empty), applies overrides in order and validates.
Experiment load_experiment(const ConfigStore& store, const std::string& file,
                           const std::vector<std::string>& overrides = {});
Experiment parse_experiment(nlohmann::json j, const std::string& source, const std::string& base_dir,
                            const ConfigStore& store);

// The cross-field rules of the parallel block (dp*tp*hp*cp within the cluster, hp
// and tp dividing the heads, partitions dividing the sequence, windows, placements,
// ring orders) on an Experiment already parsed: parse_experiment runs it, and the
// planner runs it on layouts it sets field by field. Throws ConfigError naming
// "<source>: $.parallel.<field>", as the parser does.
void check_parallel(const Experiment& e);
// The same rules without throwing: the first refusal's message, or "" (the
// planner rejects most of a large space, and an exception per layout is slow).
std::string parallel_refusal(const Experiment& e);

}  // namespace rm
