// libFuzzer harness: a Schedule file's text, read and validated as
// `ringmaster simulate --schedule` and ringmaster-run read it, then its
// carried experiment parsed. A Schedule that reads must write and read back
// to the same text (the format's round trip). Expected answers: a Schedule,
// or rm::schedule::ScheduleError / rm::ConfigError.
#include <string>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;
  rm::schedule::Schedule s;
  try {
    s = rm::schedule::parse_schedule_text(rm::fuzz::as_text(data, size), "fuzz.schedule.json");
  } catch (const rm::ConfigError&) {  // ScheduleError is one
    return 0;
  }
  const std::string once = rm::schedule::to_schedule_json(s);
  rm::schedule::Schedule again;
  try {
    again = rm::schedule::parse_schedule_text(once, "written.schedule.json");
  } catch (const rm::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("a Schedule that was read does not read back once written");
  }
  if (rm::schedule::to_schedule_json(again) != once) rm::fuzz::finding("the Schedule's round trip changed its text");
  try {
    (void)rm::parse_experiment(s.experiment, "fuzz.schedule.json (its experiment)", "", store);
  } catch (const rm::ConfigError&) {
  }
  return 0;
}
