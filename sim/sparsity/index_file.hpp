// Recorded vertical and slash indices per layer and head (format in
// docs/sparsity.md): JSON, optionally gzip, read with the strict reader.
#pragma once

#include <string>
#include <vector>

#include "sim/sparsity/interval_set.hpp"

namespace rm::sparsity {

struct RecordedHead {
  IntervalSet verticals;  // key positions
  IntervalSet slashes;    // offsets q - k
};

// Layer-major, layers x heads; throws rm::ConfigError when the file is
// malformed or its layer/head counts differ from the model's.
std::vector<RecordedHead> read_index_file(const std::string& path, int layers, int heads);

}  // namespace rm::sparsity
