// What every libFuzzer harness of tests/fuzz/ shares: the input as text, and
// the rule that only our own error types are expected answers. Anything else
// escaping a reader (std::bad_alloc, an nlohmann exception, a crash, a
// sanitizer report) is a finding; libFuzzer reports an escaped exception as a
// crash and saves the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string_view>

namespace rm::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A broken invariant the harness checks itself (e.g. a round trip that
// changes the text): print it and abort, so libFuzzer keeps the input.
[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}

}  // namespace rm::fuzz
