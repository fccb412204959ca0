// Seeded random draws of vertical columns and slash offsets for synthetic
// patterns. Positions are drawn relative to the sequence length, so one
// pattern file makes sense at 8K and at 1M tokens.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace rm::sparsity {

using Rng = std::mt19937_64;

// A well-mixed seed for one (layer, head, purpose), so heads are independent
// and the same model seed always gives the same pattern.
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

enum class Spread { uniform, log_uniform };  // log_uniform: density ~ 1/x, crowding near lo
Spread parse_spread(const std::string& name);  // throws std::invalid_argument

// Up to n distinct integers in [lo, hi), in draw order (a prefix of the result
// is itself a valid smaller draw). Fewer when [lo, hi) is too small.
std::vector<int64_t> draw_distinct(Rng& rng, int64_t lo, int64_t hi, int64_t n, Spread spread);

}  // namespace rm::sparsity
