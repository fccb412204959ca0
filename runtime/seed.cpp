#include "runtime/seed.hpp"

#include <algorithm>

#include "kernels/bf16.hpp"

namespace rm::runtime {
namespace {

// splitmix64's finaliser: a bijection of 64 bits whose output bits each depend on every input bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The largest bf16 below 1 (0x3F7F): rounding to nearest would turn [1 - 2^-9, 1) into 1.0.
constexpr float kBelowOne = 1.0f - 1.0f / 256.0f;

}  // namespace

float input_value(uint64_t seed, InputTensor t, int64_t b, int64_t token, int64_t head, int64_t d) {
  // Chaining the mix over the arguments, one at a time, keeps every
  // coordinate in its own round, so no two argument tuples share a state by
  // an arithmetic coincidence (as packing them into one word could).
  uint64_t h = mix(seed);
  h = mix(h ^ static_cast<uint64_t>(t));
  h = mix(h ^ static_cast<uint64_t>(b));
  h = mix(h ^ static_cast<uint64_t>(token));
  h = mix(h ^ static_cast<uint64_t>(head));
  h = mix(h ^ static_cast<uint64_t>(d));
  // 24 top bits: exactly representable in fp32, uniform on [0, 1).
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return std::min(kernels::round_bf16(2.0f * u - 1.0f), kBelowOne);
}

}  // namespace rm::runtime
