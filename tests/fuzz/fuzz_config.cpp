// libFuzzer harness: one config file (a model, a cluster or an experiment),
// read as each of the three, as `ringmaster` reads the files a user names.
// Expected answers: a value, or rm::ConfigError.
#include <nlohmann/json.hpp>

#include "sim/config/cluster.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/config/model.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;  // the embedded configs only
  nlohmann::json j;
  try {
    j = rm::parse_json_text(rm::fuzz::as_text(data, size), "fuzz.json");
  } catch (const rm::ConfigError&) {
    return 0;
  }
  try {
    (void)rm::parse_model(rm::JsonReader(j, "fuzz.json"));
  } catch (const rm::ConfigError&) {
  }
  try {
    (void)rm::parse_cluster(rm::JsonReader(j, "fuzz.json"));
  } catch (const rm::ConfigError&) {
  }
  try {
    (void)rm::parse_experiment(j, "fuzz.json", "", store);
  } catch (const rm::ConfigError&) {
  }
  return 0;
}
