#pragma once
// CPU reference of the attention kernels: the oracle for the CUDA kernels and
// the backend of the cpu runtime. Same params and plan as CUDA; bf16 inputs
// are widened exactly on load, everything accumulates in fp32. Blocked,
// vectorisable loops over the plan's items; threads across heads.
#include "kernels/attention.hpp"

namespace rm::kernels::cpu {

// Forward over the tile: writes params.out and params.lse for every row.
void attention_forward(const AttentionParams& params);

// Backward over the tile: dq, dk, dv (overwritten, or added to when
// params.accumulate).
void attention_backward(const AttentionParams& params);

}  // namespace rm::kernels::cpu
