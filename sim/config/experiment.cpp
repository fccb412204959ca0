#include "sim/config/experiment.hpp"

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/config/kernel_default.hpp"

namespace rm {

namespace {

const EnumName<Partition> kPartitions[] = {{Partition::contiguous, "contiguous"},
                                           {Partition::zigzag, "zigzag"},
                                           {Partition::stripe, "stripe"},
                                           {Partition::balanced, "balanced"}};
const EnumName<RingKind> kRings[] = {
    {RingKind::ring, "ring"}, {RingKind::double_ring, "double_ring"}, {RingKind::hierarchical, "hierarchical"}};
const EnumName<PlacementOrder> kPlacements[] = {{PlacementOrder::head_first, "head_first"},
                                                {PlacementOrder::context_first, "context_first"},
                                                {PlacementOrder::interleaved, "interleaved"}};
const EnumName<Checkpoint> kCheckpoints[] = {
    {Checkpoint::none, "none"}, {Checkpoint::full, "full"}, {Checkpoint::selective, "selective"}};
const EnumName<Scope> kScopes[] = {{Scope::attention_fwd, "attention_fwd"},
                                   {Scope::attention_fwd_bwd, "attention_fwd_bwd"},
                                   {Scope::layer, "layer"},
                                   {Scope::step, "step"}};
const EnumName<ShuffleMode> kShuffles[] = {{ShuffleMode::per_call, "per_call"}, {ShuffleMode::once, "once"}};
const EnumName<GradDtype> kGradDtypes[] = {{GradDtype::fp32, "fp32"}, {GradDtype::bf16, "bf16"}};
const EnumName<RingOrder> kRingOrders[] = {
    {RingOrder::rank, "rank"}, {RingOrder::zigzag_pairs, "zigzag_pairs"}, {RingOrder::topology, "topology"}};

}  // namespace

const char* to_string(Partition p) { return name_of(kPartitions, p); }
const char* to_string(RingKind r) { return name_of(kRings, r); }
const char* to_string(PlacementOrder p) { return name_of(kPlacements, p); }
const char* to_string(Checkpoint c) { return name_of(kCheckpoints, c); }
const char* to_string(Scope s) { return name_of(kScopes, s); }
const char* to_string(ShuffleMode m) { return name_of(kShuffles, m); }
const char* to_string(GradDtype d) { return name_of(kGradDtypes, d); }
const char* to_string(RingOrder o) { return name_of(kRingOrders, o); }
std::optional<Partition> partition_from_string(std::string_view s) { return value_of(kPartitions, s); }

std::string pattern_name(const Workload& w) {
  return w.pattern.is_object() && w.pattern.contains("name") && w.pattern["name"].is_string()
             ? w.pattern["name"].get<std::string>()
             : w.pattern_source;
}

std::string pattern_kind(const Workload& w) {
  // The sparsity model checks the kind when it reads the pattern; here it only picks defaults.
  return w.pattern.is_object() && w.pattern.contains("kind") && w.pattern["kind"].is_string()
             ? w.pattern["kind"].get<std::string>()
             : "unknown";
}

nlohmann::json summary_json(const Experiment& e) {
  const Workload& w = e.workload;
  const Parallel& p = e.parallel;
  const std::string pattern = pattern_name(w);
  return {{"name", e.name},
          {"source", e.source},
          {"cluster", e.cluster.name},
          {"model", e.model.name},
          {"workload",
           {{"seq_len", w.seq_len},
            {"batch", w.batch},
            {"pattern", pattern},
            {"block_q", w.block_q},
            {"block_k", w.block_k},
            {"seed", w.seed}}},
          {"parallel",
           {{"dp", p.dp},
            {"tp", p.tp},
            {"hp", p.hp},
            {"cp", p.cp},
            {"partition", to_string(p.partition)},
            {"stripe_tokens", p.stripe_tokens},
            {"ring", to_string(p.ring)},
            {"window", p.window},
            {"placement", to_string(p.placement)},
            {"checkpoint", to_string(p.checkpoint)},
            {"zero_stage", p.zero_stage},
            {"shuffle", to_string(p.shuffle)},
            {"grad_comm_dtype", to_string(p.grad_comm_dtype)},
            {"ring_order", to_string(p.ring_order)},
            {"loss_chunk_tokens", p.loss_chunk_tokens}}},
          {"kernel", {{"attention", e.kernel.name}}},
          {"scope", to_string(e.scope)},
          {"scope_layer", e.scope_layer},
          {"gpus_used", p.world()},
          {"gpus_in_cluster", e.cluster.gpus()}};
}

namespace {

// A reference that may be a name to load: (key path, config kind).
struct NamedRef {
  std::vector<std::string> path;
  const char* kind;
};
const NamedRef kRefs[] = {{{"cluster"}, "clusters"},
                          {{"model"}, "models"},
                          {{"workload", "pattern"}, "patterns"},
                          {{"kernel", "attention"}, "kernels"}};

const NamedRef* ref_at(const std::vector<std::string>& path) {
  for (const auto& r : kRefs)
    if (r.path == path) return &r;
  return nullptr;
}

// A --set value is JSON when it parses as JSON, else a string ("stripe", "512k").
// JSON that parses but breaks a reader limit (depth, a repeated key, 1e999) is
// an error, not a string; so are bytes that are not UTF-8 (they would fail
// only when the run's output is written).
bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
  return true;
}

nlohmann::json parse_value(const std::string& text, const std::string& assignment) {
  if (nlohmann::json::accept(text)) return parse_json_text(text, "--set " + assignment);
  if (!is_utf8(text)) throw ConfigError(fmt::format("--set {}: the value is not valid UTF-8", assignment));
  return text;
}

// Inlines a named reference in place (a string becomes the object it names).
void inline_ref(nlohmann::json& node, const NamedRef& ref, const ConfigStore& store, const std::string& base_dir,
                const std::string& asked_by) {
  if (!node.is_string()) return;
  auto loaded = store.load(ref.kind, node.get<std::string>(), asked_by, base_dir);
  node = std::move(loaded.json);
}

}  // namespace

void apply_override(nlohmann::json& experiment, const std::string& assignment, const ConfigStore& store,
                    const std::string& base_dir) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(fmt::format("--set {}: expected path=value, e.g. workload.seq_len=128k", assignment));
  std::string path = assignment.substr(0, eq);
  // A key that is not UTF-8 would become an object key no JSON writer can print.
  if (!is_utf8(path)) throw ConfigError(fmt::format("--set {}: the path is not valid UTF-8", assignment));
  std::vector<std::string> keys;
  for (size_t start = 0;;) {
    auto dot = path.find('.', start);
    keys.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (keys.back().empty()) throw ConfigError(fmt::format("--set {}: empty key in path \"{}\"", assignment, path));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  nlohmann::json* node = &experiment;
  std::vector<std::string> walked;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->is_object())
      throw ConfigError(fmt::format("--set {}: \"{}\" is not an object", assignment, fmt::join(walked, ".")));
    walked.push_back(keys[i]);
    nlohmann::json& next = (*node)[keys[i]];
    if (const NamedRef* r = ref_at(walked)) inline_ref(next, *r, store, base_dir, "--set " + assignment);
    if (next.is_null()) next = nlohmann::json::object();
    node = &next;
  }
  if (!node->is_object())
    throw ConfigError(fmt::format("--set {}: \"{}\" is not an object", assignment, fmt::join(walked, ".")));
  (*node)[keys.back()] = parse_value(assignment.substr(eq + 1), assignment);
}

std::string parallel_refusal(const Experiment& e) {
  // Messages as the parser's reader names a field ("file: $.parallel.key: ..."),
  // so an enumerated layout is refused in the words a parsed file would be.
  struct {
    const Experiment& e;
    std::string fail(std::string_view key, std::string_view what) const {
      return fmt::format("{}: $.parallel.{}: {}", e.source, key, what);
    }
  } p{e};
  const auto& P = e.parallel;
  // In 64 bits: each factor is at most 2^20, so the product cannot overflow here,
  // and world() (an int) is only used once it is known to fit the cluster.
  const int64_t world = int64_t(P.dp) * P.tp * P.hp * P.cp;
  if (world > e.cluster.gpus()) {
    const char* field = P.tp > 1 ? "tp" : "cp";  // with tp = 1 the message is what it always was
    return p.fail(field, P.tp > 1 ? fmt::format("dp*tp*hp*cp = {}*{}*{}*{} = {} exceeds the {} GPUs of cluster {}", P.dp,
                                         P.tp, P.hp, P.cp, world, e.cluster.gpus(), e.cluster.name)
                           : fmt::format("dp*hp*cp = {}*{}*{} = {} exceeds the {} GPUs of cluster {}", P.dp, P.hp,
                                         P.cp, world, e.cluster.gpus(), e.cluster.name));
  }
  if (e.model.heads % P.hp != 0)
    return p.fail("hp", fmt::format("expected a divisor of the model's {} heads, got {}", e.model.heads, P.hp));
  if (P.tp > 1) {
    // Megatron's rules: a tp group is consecutive GPUs of one node; each tp rank owns
    // whole query heads, whole KV heads (num_query_groups % tp == 0), an equal share of
    // the MLP columns, and its sequence-parallel share of every context rank's tokens.
    const Model& m = e.model;
    if (e.cluster.gpus_per_node % P.tp != 0)
      return p.fail("tp", fmt::format("a tensor-parallel group stays inside a node: expected a divisor of the {} GPUs "
                               "per node of cluster {}, got {}", e.cluster.gpus_per_node, e.cluster.name, P.tp));
    if (m.heads % (int64_t(P.tp) * P.hp) != 0)
      return p.fail("tp", fmt::format("tp*hp must divide the model's {} heads, got tp*hp = {}*{}", m.heads, P.tp, P.hp));
    if (m.kv_heads % P.tp != 0)
      return p.fail("tp", fmt::format("expected a divisor of the model's {} KV heads (each tp rank owns whole KV heads), "
                               "got {}", m.kv_heads, P.tp));
    if (m.intermediate % P.tp != 0)
      return p.fail("tp", fmt::format("expected a divisor of the model's intermediate size {}, got {}", m.intermediate, P.tp));
    const int64_t per_rank = e.workload.seq_len / (int64_t(P.cp) * P.hp);
    if (e.workload.seq_len % (int64_t(P.cp) * P.hp) != 0 || per_rank % P.tp != 0)
      return p.fail("tp", fmt::format("sequence parallelism splits each rank's workload.seq_len/(cp*hp) tokens over tp: "
                               "expected workload.seq_len divisible by cp*hp*tp = {}, got {}",
                               int64_t(P.cp) * P.hp * P.tp, e.workload.seq_len));
  }
  const int64_t S = e.workload.seq_len;
  // Every partition first splits the sequence into cp*hp equal shares: a cp that
  // does not divide is named as cp, before any partition's finer unit.
  if (S % (int64_t(P.cp) * P.hp) != 0)
    return p.fail("cp", fmt::format("each context rank holds workload.seq_len/(cp*hp) tokens: expected cp*hp to divide "
                                    "{}, got cp*hp = {}*{}",
                                    S, P.cp, P.hp));
  int64_t unit = 0;  // what the partition needs the sequence divisible by
  const char* why = "";
  switch (P.partition) {
    case Partition::contiguous: unit = int64_t(P.cp) * P.hp, why = "cp*hp"; break;
    case Partition::zigzag: unit = 2 * int64_t(P.cp) * P.hp, why = "2*cp*hp"; break;
    case Partition::stripe:
    case Partition::balanced: unit = int64_t(P.cp) * P.stripe_tokens * P.hp, why = "cp*stripe_tokens*hp"; break;
  }
  if (unit > 0 && S % unit != 0)
    return p.fail("partition", fmt::format("{} partition needs workload.seq_len divisible by {} ({}), got {}",
                                           to_string(P.partition), unit, why, S));
  if (P.ring == RingKind::double_ring && (P.window < 1 || P.cp % P.window != 0))
    return p.fail("window", fmt::format("expected a divisor of cp ({}), got {}", P.cp, P.window));
  if (P.placement == PlacementOrder::interleaved) {
    if (P.ring != RingKind::double_ring)
      return p.fail("placement", "interleaved places double-ring windows: it needs parallel.ring = double_ring");
    if (P.window >= 8 || P.window == P.cp || P.cp % (2 * P.window) != 0)
      return p.fail("placement", fmt::format("interleaved windows need window < 8, window < cp and cp divisible by "
                                      "2*window (LoongTrain), got window {} with cp {}", P.window, P.cp));
  }
  if (P.ring_order != RingOrder::rank && P.cp > 1 && P.ring != RingKind::ring)
    return p.fail("ring_order", fmt::format("{} orders a flat ring: it needs parallel.ring = ring (double_ring and "
                                     "hierarchical lay out their own rings), got {}",
                                     to_string(P.ring_order), to_string(P.ring)));
  if (P.ring_order == RingOrder::zigzag_pairs && P.cp % 2 != 0)
    return p.fail("ring_order", fmt::format("zigzag_pairs visits context ranks in pairs (0, cp-1, 1, cp-2, ...): "
                                     "expected an even cp, got {}", P.cp));
  return "";
}

void check_parallel(const Experiment& e) {
  if (std::string why = parallel_refusal(e); !why.empty()) throw ConfigError(why);
}

Experiment load_experiment(const ConfigStore& store, const std::string& file,
                           const std::vector<std::string>& overrides) {
  LoadedConfig loaded = file.empty() ? store.load("experiments", kDefaultExperiment, "default experiment")
                                     : store.load("experiments", file, "experiment");
  for (const auto& o : overrides) apply_override(loaded.json, o, store, loaded.base_dir);
  return parse_experiment(std::move(loaded.json), loaded.source, loaded.base_dir, store);
}

nlohmann::json override_bases(const ConfigStore& store, const std::string& file,
                              const std::vector<std::string>& overrides) {
  LoadedConfig loaded = file.empty() ? store.load("experiments", kDefaultExperiment, "default experiment")
                                     : store.load("experiments", file, "experiment");
  nlohmann::json out = nlohmann::json::object();
  for (const auto& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // load_experiment refuses it
    const std::string path = o.substr(0, eq);
    const nlohmann::json* node = &loaded.json;
    nlohmann::json inlined;  // a named part on the way, loaded
    std::vector<std::string> walked;
    for (size_t start = 0; node;) {
      const size_t dot = path.find('.', start);
      const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object() || !node->contains(key)) {
        node = nullptr;
        break;
      }
      walked.push_back(key);
      node = &(*node)[key];
      if (dot == std::string::npos) break;
      start = dot + 1;
      if (const NamedRef* r = ref_at(walked); r && node->is_string()) {
        inlined = store.load(r->kind, node->get<std::string>(), "--set " + o, loaded.base_dir).json;
        node = &inlined;
      }
    }
    out[path] = node ? *node : nlohmann::json();
  }
  return out;
}

Experiment parse_experiment(nlohmann::json j, const std::string& source, const std::string& base_dir,
                            const ConfigStore& store) {
  Experiment e;
  e.source = source;
  JsonReader r(j, source);
  e.name = r.str_or("name", "experiment");

  // Named parts are inlined so the experiment can travel alone (a Schedule carries it).
  auto load_part = [&](nlohmann::json& node, const NamedRef& ref, const std::string& key) -> std::pair<std::string, std::string> {
    if (node.is_string()) {
      auto loaded = store.load(ref.kind, node.get<std::string>(), fmt::format("{}: $.{}", source, key), base_dir);
      node = std::move(loaded.json);
      return {loaded.source, loaded.base_dir};
    }
    if (!node.is_object())
      throw ConfigError(fmt::format("{}: $.{}: expected a {} name or an inline object", source, key, ref.kind));
    return {fmt::format("{} ($.{})", source, key), base_dir};
  };

  if (!r.has("cluster")) r.fail("cluster", "missing required field");
  if (!r.has("model")) r.fail("model", "missing required field");
  auto [cluster_src, cluster_dir] = load_part(j["cluster"], kRefs[0], "cluster");
  auto [model_src, model_dir] = load_part(j["model"], kRefs[1], "model");
  e.cluster = parse_cluster(JsonReader(j["cluster"], cluster_src));
  e.model = parse_model(JsonReader(j["model"], model_src));

  {
    auto w = r.object("workload");
    e.workload.seq_len = w.size("seq_len", 1, int64_t(1) << 34);
    e.workload.batch = static_cast<int>(w.integer_or("batch", 1, 1 << 20, 1));
    e.workload.block_q = w.integer_or("block_q", 16, 4096, 128);
    e.workload.block_k = w.integer_or("block_k", 16, 4096, 64);
    e.workload.seed = static_cast<uint64_t>(w.integer_or("seed", 0, int64_t(1) << 62, 1));
    if (!w.has("pattern")) {  // what most users train with
      j["workload"]["pattern"] = "dense-causal";
      w.has("pattern");  // marks it read
    }
    auto [pat_src, pat_dir] = load_part(j["workload"]["pattern"], kRefs[2], "workload.pattern");
    e.workload.pattern = j["workload"]["pattern"];
    e.workload.pattern_source = pat_src;
    e.workload.pattern_base_dir = pat_dir;
    w.finish();
  }
  {
    auto p = r.object("parallel");
    e.parallel.dp = static_cast<int>(p.integer_or("dp", 1, 1 << 20, 1));
    e.parallel.tp = static_cast<int>(p.integer_or("tp", 1, 1 << 20, 1));
    e.parallel.hp = static_cast<int>(p.integer_or("hp", 1, 1 << 20, 1));
    e.parallel.cp = static_cast<int>(p.integer_or("cp", 1, 1 << 20, 1));
    e.parallel.partition = p.enum_or("partition", kPartitions, Partition::zigzag);
    e.parallel.stripe_tokens = p.has("stripe_tokens") ? p.size("stripe_tokens", 1, int64_t(1) << 30) : 128;
    // Ulysses is no ring: it is what head parallelism with one context rank runs.
    if (p.has("ring") && p.raw()["ring"] == "ulysses")
      p.fail("ring", "ulysses is not a ring kind: Ulysses (all-to-all) is parallel.hp > 1 with parallel.cp = 1 "
                     "(hp a divisor of the model's heads); rings are ring, double_ring, hierarchical");
    e.parallel.ring = p.enum_or("ring", kRings, RingKind::ring);
    e.parallel.window = static_cast<int>(p.integer_or("window", 1, 1 << 20, 1));
    e.parallel.placement = p.enum_or("placement", kPlacements, PlacementOrder::head_first);
    e.parallel.checkpoint = p.enum_or("checkpoint", kCheckpoints, Checkpoint::full);
    e.parallel.zero_stage = static_cast<int>(p.integer_or("zero_stage", 0, 3, 1));
    e.parallel.shuffle = p.enum_or("shuffle", kShuffles, ShuffleMode::per_call);
    e.parallel.grad_comm_dtype = p.enum_or("grad_comm_dtype", kGradDtypes, GradDtype::fp32);
    e.parallel.ring_order = p.enum_or("ring_order", kRingOrders, RingOrder::rank);
    e.parallel.loss_chunk_tokens =
        p.has("loss_chunk_tokens") ? p.size("loss_chunk_tokens", 0, int64_t(1) << 40) : Parallel{}.loss_chunk_tokens;

    check_parallel(e);  // before finish(): a bad layout is named before an unknown key, as always
    p.finish();
  }
  {
    // kernel.attention: a kernel name under configs/kernels/ or an inline table.
    if (!r.has("kernel")) j["kernel"] = nlohmann::json::object();
    auto k = r.object("kernel");
    const std::string kind = pattern_kind(e.workload);
    if (k.has("attention")) {
      e.kernel_choice = "named by the experiment";
    } else {
      KernelDefault d = default_attention_kernel(e.cluster.gpu, kind, cluster_src);
      j["kernel"]["attention"] = d.kernel;
      e.kernel_choice = std::move(d.why);
    }
    auto [kernel_src, kernel_dir] = load_part(j["kernel"]["attention"], kRefs[3], "kernel.attention");
    e.kernel = parse_attention_kernel(
        JsonReader(j["kernel"]["attention"], fmt::format("{} (kernel.attention, cluster {})", kernel_src, e.cluster.name)),
        e.cluster.gpu);
    k.value("attention");
    k.finish();
    if (auto w = kernel_mask_warning(e.kernel.name, e.cluster.gpu, kind)) e.warnings.push_back(*std::move(w));
  }
  e.scope = r.enum_or("scope", kScopes, Scope::step);
  // Layers differ in sparsity: the narrow scopes can look at any one of them.
  e.scope_layer = static_cast<int>(r.integer_or("scope_layer", 0, e.model.layers - 1, 0));
  r.finish();
  e.resolved = std::move(j);
  return e;
}

}  // namespace rm
