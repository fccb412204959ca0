// Which attention kernel an experiment runs when it names none (kernel.attention):
// what the user's framework would call for this mask on this GPU generation.
// Masks FlashAttention runs itself (dense, document-packed via varlen, sliding
// window) get FlashAttention-2 on Ampere and FlashAttention-3 on Hopper; masks
// that need a sparse index (vertical-slash, block-sparse, A-shape) get
// MTraining's block-sparse kernel; CPU clusters the runtime's reference kernels.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/config/cluster.hpp"

namespace rm {

// True for pattern kinds FlashAttention runs without a sparse index.
bool flash_attention_mask(std::string_view pattern_kind);

struct KernelDefault {
  std::string kernel;  // a name under configs/kernels/
  std::string why;     // "fa3: FlashAttention-3, the default for a dense_causal mask on hopper GPUs"
};

// The default for `pattern_kind` on `gpu`; throws ConfigError naming `where`
// (the cluster's gpu.arch) when the generation has no default (volta, unknown).
KernelDefault default_attention_kernel(const GpuSpec& gpu, std::string_view pattern_kind, const std::string& where);

// The one-line warning for a kernel that is a poor fit for the mask (a dense mask
// priced on the block-sparse kernel), or nothing.
std::optional<std::string> kernel_mask_warning(const std::string& kernel, const GpuSpec& gpu,
                                               std::string_view pattern_kind);

}  // namespace rm
