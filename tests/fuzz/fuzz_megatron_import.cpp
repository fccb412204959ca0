// libFuzzer harness: a Megatron-LM argument list, read as `ringmaster import
// megatron --args TEXT` reads it: import_megatron over the embedded configs
// (the first byte picks --gpus: 0, from the batch sizes, or 1..255), then the
// experiment it makes over the default experiment's cluster, pattern and
// kernel, parsed as every experiment is. Expected answers: an experiment, or
// rm::ConfigError naming the argument or key.
#include <string>

#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/frameworks/megatron_import.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;  // the embedded configs only
  if (size == 0) return 0;
  const int gpus = data[0];
  const std::string args(rm::fuzz::as_text(data + 1, size - 1));
  rm::frameworks::MegatronImport imp;
  try {
    imp = rm::frameworks::import_megatron(args, gpus, store);
  } catch (const rm::ConfigError&) {
    return 0;
  }
  // What the CLI does with it: the default experiment with the imported keys in place.
  nlohmann::json j = store.load("experiments", rm::kDefaultExperiment, "default experiment").json;
  j["model"] = imp.model;
  j["workload"]["seq_len"] = imp.workload["seq_len"];
  j["workload"]["batch"] = imp.workload["batch"];
  j["parallel"] = imp.parallel;
  if (j.contains("scope_layer")) j.erase("scope_layer");
  try {
    (void)rm::parse_experiment(j, "fuzz.args", "", store);
  } catch (const rm::ConfigError&) {
  }
  return 0;
}
