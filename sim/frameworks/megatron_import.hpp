// The reverse of --emit megatron: a Megatron-LM argument list (as given to
// pretrain_gpt.py; comments and line continuations allowed) read into the
// experiment keys it determines: the model shape (a shipped model's name when
// the shape matches one, else an inline model), workload.seq_len and batch, and
// the parallel block. What is not read is listed, with why, never dropped silently.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"

namespace rm::frameworks {

struct MegatronImport {
  nlohmann::json model;     // a shipped model's name, or an inline model object
  nlohmann::json workload;  // seq_len, batch
  nlohmann::json parallel;  // the whole parallel block
  struct Row {
    std::string argument;  // "--context-parallel-size 8"
    std::string key;       // "parallel.cp"
    std::string value;     // "4"
  };
  std::vector<Row> read;             // what each argument became
  std::vector<std::string> ignored;  // "--lr 1e-4 (not modelled)": arguments not read, or read only in part
};

// gpus: the world size; 0 = data parallel from --global-batch-size / --micro-batch-size.
// Throws ConfigError naming the argument for a value that is not what Megatron takes.
MegatronImport import_megatron(const std::string& args, int gpus, const ConfigStore& store);

// Splits argument text into words: '#' comments to the end of a line, "\" line
// continuations, and single or double quotes around a word are removed.
std::vector<std::string> split_arguments(const std::string& text);

}  // namespace rm::frameworks
