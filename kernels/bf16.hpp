#pragma once
// bf16 on the host: the storage format the CUDA kernels read, emulated on
// the CPU by widening to fp32 on load (exact) and rounding on store.
#include <bit>
#include <cstdint>

namespace rm::kernels {

using bf16_bits = std::uint16_t;  // raw bf16 storage, same bytes as __nv_bfloat16

// Round to nearest even, as the hardware conversion does; NaN stays NaN.
inline bf16_bits to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>((u + rounding) >> 16);
}

inline float from_bf16(bf16_bits b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace rm::kernels
