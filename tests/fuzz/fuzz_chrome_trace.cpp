// libFuzzer harness: a Timeline as Chrome-trace JSON, read as
// `ringmaster diff` and the join read them. What reads must write (the writer
// refuses nothing the reader accepted) and read back to the same text.
// Expected answers: a Timeline, or rm::traces::TraceError.
#include <string>

#include "traces/chrome_trace.hpp"
#include "traces/trace_error.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rm::traces;
  Timeline t;
  try {
    t = from_chrome_json(rm::fuzz::as_text(data, size), "fuzz.trace.json");
  } catch (const TraceError&) {
    return 0;
  }
  std::string once;
  try {
    once = to_chrome_json(t);
  } catch (const TraceError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("the writer refuses a Timeline the reader accepted");
  }
  Timeline again;
  try {
    again = from_chrome_json(once, "written.trace.json");
  } catch (const TraceError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("a written Timeline does not read back");
  }
  if (to_chrome_json(again) != once) rm::fuzz::finding("the Timeline's round trip changed its text");
  return 0;
}
