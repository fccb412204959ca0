// GoogleTest prints a parameter it knows nothing about as a byte dump (also
// in ctest's test list); this prints an EngineKind by its name instead.
#pragma once

#include <ostream>

#include "sim/engine/engine.hpp"

namespace rm::engine {

inline void PrintTo(EngineKind k, std::ostream* os) { *os << to_string(k); }

}  // namespace rm::engine
