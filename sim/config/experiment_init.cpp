#include "sim/config/experiment_init.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "sim/config/cluster.hpp"
#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"

namespace rm {

namespace {

// The largest context-parallel degree that divides the GPUs and that a zigzag
// partition can split the sequence over (2*cp chunks of whole tokens).
int zigzag_cp(int gpus, int64_t seq_len) {
  for (int cp = gpus; cp > 1; --cp)
    if (gpus % cp == 0 && seq_len % (2 * int64_t(cp)) == 0) return cp;
  return 1;
}

// A config given as a .json path is written absolute: the experiment file may
// be written elsewhere, and its relative paths would resolve against its own folder.
std::string portable(const std::string& name) {
  return name.ends_with(".json") ? std::filesystem::absolute(name).lexically_normal().string() : name;
}

}  // namespace

InitResult init_experiment(const InitRequest& q, const ConfigStore& store) {
  if (q.name.empty()) throw ConfigError("init: NAME: expected a non-empty experiment name");
  const int64_t seq_len = parse_size_text(q.seq_len, "--seq-len");
  // Loaded only to check the names (the error lists the known ones) and to read the cluster's size.
  (void)store.load("models", q.model, "--model");
  (void)store.load("patterns", q.pattern, "--pattern");
  if (!q.kernel.empty()) (void)store.load("kernels", q.kernel, "--kernel");
  LoadedConfig cluster = store.load("clusters", q.cluster, "--cluster");
  const Cluster c = parse_cluster(JsonReader(cluster.json, cluster.source));

  InitResult out;
  nlohmann::ordered_json cluster_ref = portable(q.cluster);
  int nodes = c.nodes;
  if (q.nodes && *q.nodes != c.nodes) {
    if (*q.nodes < 1) throw ConfigError(fmt::format("--nodes: expected 1 or more, got {}", *q.nodes));
    // The cluster file's node count is replaced inline: the file stays self-contained.
    nodes = *q.nodes;
    cluster_ref = cluster.json;
    cluster_ref["name"] = fmt::format("{}-{}nodes", c.name, nodes);
    cluster_ref["nodes"] = nodes;
  }
  const int gpus = nodes * c.gpus_per_node;
  const int cp = zigzag_cp(gpus, seq_len);
  const int dp = gpus / cp;
  out.choices.push_back({"parallel.cp", std::to_string(cp),
                         cp == gpus ? fmt::format("every GPU of the cluster ({} nodes x {})", nodes, c.gpus_per_node)
                                    : fmt::format("the largest divisor of the {} GPUs that splits {} tokens into "
                                                  "2*cp zigzag chunks",
                                                  gpus, seq_len)});
  out.choices.push_back({"parallel.dp", std::to_string(dp),
                         dp == 1 ? "one replica: the whole cluster holds one sequence"
                                 : "the GPUs context parallelism leaves, as data-parallel replicas"});
  out.choices.push_back({"parallel.hp, parallel.tp", "1, 1", "no head or tensor parallelism (Ulysses is hp > 1)"});
  out.choices.push_back({"parallel.partition", "zigzag", "balances a causal mask across the ring"});
  out.choices.push_back({"parallel.ring", "ring", "one flat ring over the context ranks"});
  out.choices.push_back({"parallel.checkpoint", "full", "recompute every layer in backward: the least memory"});
  out.choices.push_back({"workload.batch", "1", "one sequence per step"});
  out.choices.push_back({"scope", "step", "a whole training step"});

  auto& e = out.experiment;
  e["name"] = q.name;
  e["description"] = fmt::format("Written by ringmaster init: {} at {} tokens on {} ({} GPUs), pattern {}.", q.model,
                                 q.seq_len, c.name, gpus, q.pattern);
  e["cluster"] = cluster_ref;
  e["model"] = portable(q.model);
  e["workload"] = {{"seq_len", q.seq_len}, {"batch", 1}, {"pattern", portable(q.pattern)}};
  e["parallel"] = {{"dp", dp},         {"tp", 1},           {"hp", 1},
                   {"cp", cp},         {"partition", "zigzag"}, {"ring", "ring"},
                   {"checkpoint", "full"}};
  if (!q.kernel.empty()) e["kernel"] = {{"attention", portable(q.kernel)}};
  e["scope"] = "step";
  // Loaded as simulate would: the layout checked, and the kernel the loader picks
  // (by mask and GPU generation) written out so the file says it.
  const Experiment loaded = parse_experiment(nlohmann::json::parse(e.dump()), "init " + q.name, "", store);
  if (q.kernel.empty()) {
    e.erase("scope");  // kept last in the file, after the kernel
    e["kernel"] = {{"attention", loaded.kernel.name}};
    e["scope"] = "step";
    out.choices.push_back({"kernel.attention", loaded.kernel.name, loaded.kernel_choice});
  }
  return out;
}

}  // namespace rm
