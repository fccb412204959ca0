// Where packed documents start: the `documents` object of a document pattern
// (docs/sparsity.md, "Documents") turned into sorted start positions for one
// sequence length. Lengths come from a list (cycled), a uniform range, a
// weighted histogram of ranges, or fractions of the sequence up to a cap;
// random draws are seeded by the experiment's workload.seed, so a spec and a
// seed always give the same documents. The last document ends at seq_len.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/json_reader.hpp"

namespace rm::sparsity {

// Throws rm::ConfigError ("file: $.documents.field: what") on a bad field.
std::vector<int64_t> document_starts(const JsonReader& documents, int64_t seq_len, uint64_t seed);

}  // namespace rm::sparsity
