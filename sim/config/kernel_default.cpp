#include "sim/config/kernel_default.hpp"

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

namespace rm {

namespace {

// The kernel a framework runs, by generation: (dense-family mask, sparse-index mask).
struct ArchKernels {
  GpuArch arch;
  const char* flash;   // dense, document, sliding window
  const char* sparse;  // vertical-slash, block-sparse, A-shape
};
const ArchKernels kByArch[] = {
    {GpuArch::ampere, "fa2", "block_sparse"},
    {GpuArch::hopper, "fa3", "block_sparse"},
    {GpuArch::cpu, "cpu_reference", "cpu_reference"},
};

const char* kernel_title(std::string_view k) {
  if (k == "fa2") return "FlashAttention-2";
  if (k == "fa3") return "FlashAttention-3";
  if (k == "block_sparse") return "MTraining's block-sparse kernel";
  return "the CPU reference kernels";
}

}  // namespace

bool flash_attention_mask(std::string_view kind) {
  return kind == "dense_causal" || kind == "dense_full" || kind == "document_causal" || kind == "document_full" ||
         kind == "sliding_window";
}

KernelDefault default_attention_kernel(const GpuSpec& gpu, std::string_view pattern_kind, const std::string& where) {
  for (const auto& row : kByArch) {
    if (row.arch != gpu.arch) continue;
    const char* k = flash_attention_mask(pattern_kind) ? row.flash : row.sparse;
    return {k, fmt::format("{}: {}, the default for a {} mask on {} GPUs", k, kernel_title(k), pattern_kind,
                           to_string(gpu.arch))};
  }
  if (gpu.arch == GpuArch::unknown)
    throw ConfigError(fmt::format("{}: $.gpu.arch: missing, so no attention kernel can be chosen for {}: set gpu.arch "
                                  "(ampere, hopper, volta, cpu) or name kernel.attention (init: --kernel)",
                                  where, gpu.model));
  throw ConfigError(fmt::format("{}: $.gpu.arch: no attention kernel is shipped for {} GPUs ({}; FlashAttention needs "
                                "Ampere or newer): name one with kernel.attention (init: --kernel)",
                                where, to_string(gpu.arch), gpu.model));
}

std::optional<std::string> kernel_mask_warning(const std::string& kernel, const GpuSpec& gpu,
                                               std::string_view pattern_kind) {
  if (kernel != "block_sparse" || !flash_attention_mask(pattern_kind)) return std::nullopt;
  std::string better = "fa2";
  for (const auto& row : kByArch)
    if (row.arch == gpu.arch) better = row.flash;
  return fmt::format("a {} mask priced on block_sparse (MTraining's sparse kernel, slower per FLOP than "
                     "FlashAttention): frameworks run it on {}; --set kernel.attention={}",
                     pattern_kind, better, better);
}

}  // namespace rm
