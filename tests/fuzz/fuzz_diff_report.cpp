// libFuzzer harness: the JSON of a `simulate --json` report, read as
// `ringmaster diff` reads each side: parse_json_checked (the shared limits),
// then the keys diff requires. diff dumps values it does not read as text
// (--set overrides, experiment keys) and prints its own JSON: a value that
// parsed must dump, and the dump must read back to the same value.
// Expected answers: a report, or rm::traces::JsonTextError.
#include <string>

#include <nlohmann/json.hpp>

#include "traces/json_text.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    j = rm::traces::parse_json_checked(rm::fuzz::as_text(data, size), "fuzz.simulate.json");
  } catch (const rm::traces::JsonTextError&) {
    return 0;
  }
  std::string once;
  try {
    once = j.dump(2);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("a value parse_json_checked accepted does not dump");
  }
  nlohmann::json again;
  try {
    again = rm::traces::parse_json_checked(once, "dumped.json");
  } catch (const rm::traces::JsonTextError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("a dumped value does not read back");
  }
  if (again != j) rm::fuzz::finding("the value's round trip changed it");
  // What diff requires of a report before it reads figures from it.
  for (const char* k : {"step_time_s", "experiment", "breakdown", "critical_path"})
    if (!j.is_object() || !j.contains(k)) return 0;
  if (!j["step_time_s"].is_number() || !j["experiment"].is_object()) return 0;
  return 0;
}
