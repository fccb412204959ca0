// The message of the rm::traces::TraceError that f throws, or "(no error)":
// what the trace and file-layer tests compare against the file the message must name.
#pragma once

#include <functional>
#include <string>

#include "traces/trace_error.hpp"

namespace rm::test {

inline std::string trace_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const traces::TraceError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace rm::test
