// The one error type of traces/: a bad or unreadable trace file. Messages are
// one line and name the file (and the event index or JSON key when known).
// traces/ uses nothing else of ours, so it cannot share sim's ConfigError.
#pragma once

#include <stdexcept>

namespace rm::traces {

struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace rm::traces
