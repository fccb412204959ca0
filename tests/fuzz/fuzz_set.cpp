// libFuzzer harness: `--set` overrides, one per input line, applied to the
// embedded default experiment as `ringmaster simulate --set ...` applies them.
// Expected answers: an Experiment, or rm::ConfigError.
#include <algorithm>
#include <string>
#include <vector>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;
  std::vector<std::string> sets;
  const std::string_view text = rm::fuzz::as_text(data, size);
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    sets.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  try {
    (void)rm::load_experiment(store, "", sets);
  } catch (const rm::ConfigError&) {
  }
  return 0;
}
