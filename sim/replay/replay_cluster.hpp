// The cluster a replay runs on: a cluster config by name (or file) with
// `--set cluster.KEY=VALUE` what-ifs applied through the experiment override
// code (apply_override), so replay and simulate read one key the same way.
#pragma once

#include <string>
#include <vector>

#include "sim/config/cluster.hpp"
#include "sim/config/config_store.hpp"

namespace rm::replay {

// `sets` are "cluster.a.b=value" (or "cluster=NAME"); any other key is a
// ConfigError naming it. Throws ConfigError for an unknown cluster or field.
Cluster load_cluster(const ConfigStore& store, const std::string& name, const std::vector<std::string>& sets);

// The cluster config whose gpu.model matches the recorded GPU name (e.g.
// "NVIDIA A100-SXM4-80GB" -> a100-80g-*: the model's family and memory size
// must agree), with at least `gpus` GPUs, the smallest such; empty when none.
std::string default_cluster(const ConfigStore& store, const std::string& gpu_name, int gpus);

}  // namespace rm::replay
