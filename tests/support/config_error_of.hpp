// The message of the rm::ConfigError that f throws, or "(no error)": what the
// bad-input tests compare against the field and file the message must name.
#pragma once

#include <functional>
#include <string>

#include "sim/config/json_reader.hpp"

namespace rm::test {

inline std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace rm::test
