// libFuzzer harness: a measured Timeline joined against the Schedule it
// claims to have run, as `ringmaster compare --predicted P --schedule`-style
// callers do: check_against_schedule, then compare() with the Schedule (the
// critical path, the tables, the top contributors), its JSON and CSV, and the
// side-by-side Timeline written as Chrome JSON. The Schedule and the
// predicted Timeline are tests/data/compare's tiny ring, read once.
// Expected answers: a Comparison, or rm::ConfigError / rm::traces::TraceError.
#include <string>

#include "sim/config/json_reader.hpp"  // ConfigError
#include "sim/compare/compare.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/trace_error.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

const std::string kData = std::string(RINGMASTER_SOURCE_DIR) + "/tests/data/compare/";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::schedule::Schedule schedule = rm::schedule::read_schedule(kData + "tiny-ring.json.gz");
  static const rm::traces::Timeline predicted = rm::traces::read_chrome_trace(kData + "tiny-ring-predicted.json.gz");
  try {
    const rm::traces::Timeline measured = rm::traces::from_chrome_json(rm::fuzz::as_text(data, size), "fuzz.measured.json");
    rm::compare::check_against_schedule(schedule, "tiny-ring.json.gz", measured, "fuzz.measured.json");
    rm::compare::CompareOptions o;
    o.schedule = &schedule;
    o.measured_name = "fuzz.measured.json";
    const rm::compare::Comparison c = rm::compare::compare(predicted, measured, o);
    (void)rm::compare::to_json(c).dump(2);
    (void)rm::compare::to_csv(c);
    (void)rm::traces::to_chrome_json(rm::compare::side_by_side(predicted, measured));
  } catch (const rm::ConfigError&) {
  } catch (const rm::traces::TraceError&) {
  }
  return 0;
}
