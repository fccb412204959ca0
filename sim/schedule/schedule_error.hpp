// A Schedule that cannot be read or is not executable. One line, naming the
// file (when there is one) and the op. A ConfigError, so the CLI's single
// bad-input handler reports it.
#pragma once

#include "sim/config/json_reader.hpp"

namespace rm::schedule {

struct ScheduleError : rm::ConfigError {
  using rm::ConfigError::ConfigError;
};

}  // namespace rm::schedule
