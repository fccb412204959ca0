// libFuzzer harness: a Schedule file as `ringmaster simulate --schedule`
// loads it (pipeline::load_schedule_file): read and validated, its op count
// and ranks checked against this machine's memory before the ops are
// allocated, its carried experiment parsed and checked against the ops (every
// rank on its own GPU, dp*tp*hp*cp ranks, the pattern builds, token sets end
// at seq_len, our generator's op count). The machine's memory is set to
// 1 GiB (RINGMASTER_MEMORY_BYTES) so a file declaring more is refused by that
// check, as it would be on a small machine, not by libFuzzer's malloc limit.
// Expected answers: a loaded Schedule, or rm::ConfigError (ScheduleError is one).
#include <cstdlib>
#include <string>

#include "sim/config/json_reader.hpp"  // ConfigError
#include "sim/config/config_store.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "tests/fuzz/fuzz_files.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("RINGMASTER_MEMORY_BYTES", "1073741824", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;
  const std::string path = rm::fuzz::write_scratch("input.schedule.json", rm::fuzz::as_text(data, size));
  try {
    (void)rm::pipeline::load_schedule_file(path, store);
  } catch (const rm::ConfigError&) {
  }
  return 0;
}
