// libFuzzer harness: one rank's Kineto (PyTorch profiler) trace, read by
// traces/kineto.hpp's parse_kineto as `ringmaster replay` reads it.
// Expected answers: a KinetoImport, or rm::traces::TraceError.
#include <string>
#include <utility>
#include <vector>

#include "traces/kineto.hpp"
#include "traces/trace_error.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rm::traces;
  try {
    (void)parse_kineto({{"fuzz.kineto.json", std::string(rm::fuzz::as_text(data, size))}});
  } catch (const TraceError&) {
  }
  return 0;
}
