// libFuzzer harness: one run of `ringmaster calibrate --runs DIR`, a Schedule
// and the Timeline measured executing it, as calibrate::load_run reads the
// pair (both files read, the Schedule validated with its experiment, the
// Timeline checked op by op against it), then its measured step. The input
// is the Schedule's text, a NUL byte, the measured Timeline's text.
// Expected answers: a Run, or rm::ConfigError.
#include <cstdlib>
#include <string>

#include "sim/config/json_reader.hpp"  // ConfigError
#include "sim/calibrate/runs.hpp"
#include "sim/config/config_store.hpp"
#include "tests/fuzz/fuzz_files.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("RINGMASTER_MEMORY_BYTES", "1073741824", 1);  // as fuzz_load_schedule: refused before allocating
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;
  const auto parts = rm::fuzz::split_at_nul(rm::fuzz::as_text(data, size), 2);
  if (parts.size() != 2) return 0;
  const std::string schedule = rm::fuzz::write_scratch("run.schedule.json", parts[0]);
  const std::string measured = rm::fuzz::write_scratch("run.measured.json", parts[1]);
  try {
    const rm::calibrate::Run r = rm::calibrate::load_run(schedule, measured, store);
    (void)rm::calibrate::measured_step_s(r.measured);
  } catch (const rm::ConfigError&) {
  }
  return 0;
}
