#pragma once
// The runtime's random inputs: every element of the global q, k, v and dO
// tensors is a pure function of (seed, tensor, coordinates), so each rank
// fills its own shard and the single-process reference (reference.hpp) fills
// the whole tensors, and both see exactly the same numbers, with no
// communication and whatever the partition or the rank count.
#include <cstdint>

namespace rm::runtime {

enum class InputTensor : uint8_t { q, k, v, d_o };

// Element (b, token, head, d) of a global input tensor; token is the global
// position, head is global (query head for q and d_o, KV head for k and v).
// A counter-based hash (splitmix64 over every argument, no state), uniform in
// [-1, 1), rounded to bf16 so that bf16 storage holds it exactly.
float input_value(uint64_t seed, InputTensor t, int64_t b, int64_t token, int64_t head, int64_t d);

}  // namespace rm::runtime
