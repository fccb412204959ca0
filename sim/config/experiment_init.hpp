// A first experiment file from the few facts a user knows about their job
// (`ringmaster init`): model, cluster, node count, sequence length and mask.
// Everything else is chosen here and each choice is returned with its reason,
// so the user sees what was assumed and can change it in the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"

namespace rm {

struct InitRequest {
  std::string name;
  std::string model;               // a name under configs/models/ (or a .json path)
  std::string cluster;             // a name under configs/clusters/ (or a .json path)
  std::optional<int> nodes;        // replaces the cluster's node count
  std::string seq_len;             // "128k", "1M", "131072"
  std::string pattern = "dense-causal";  // a name under configs/patterns/
  std::string kernel;               // configs/kernels/ name; empty: the default of mask and GPU
};

struct InitChoice {
  std::string key;    // "parallel.cp"
  std::string value;  // "64"
  std::string why;    // "every GPU of the cluster"
};

struct InitResult {
  nlohmann::ordered_json experiment;  // the file's contents; parse_experiment accepts it
  std::vector<InitChoice> choices;    // what was not asked for, and why
};

// Throws ConfigError (naming the flag) for an unknown name or a job that cannot be laid out.
InitResult init_experiment(const InitRequest& request, const ConfigStore& store);

}  // namespace rm
