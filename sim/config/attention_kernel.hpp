// An attention kernel implementation as its JSON file describes it
// (configs/kernels/, chosen by the experiment key `kernel.attention`): which
// FLOPs its measured rates divide, whether it takes a sparse index, and for the
// cluster's GPU its measured TFLOP/s by direction (fwd, bwd), mask (causal,
// full) and tokens per call. The table is what calibration fits; the rate
// lookup itself (interpolation) is CostModel's (sim/cost/kernel_rate.hpp).
#pragma once

#include <string>
#include <vector>

#include "sim/config/cluster.hpp"
#include "sim/config/config_store.hpp"
#include "sim/config/json_reader.hpp"

namespace rm {

// What the kernel's rates are FLOPs of.
enum class KernelWork {
  allowed_pairs,  // the pairs the mask allows (FlashAttention's benchmark count: causal = half)
  tiles,          // every entry of every tile it executes (a block-sparse kernel's plan)
};

// Measured rate against tokens per call: (tokens, TFLOP/s), tokens strictly increasing.
struct RatePoint {
  double tokens = 0;
  double tflops = 0;
};
using RateCurve = std::vector<RatePoint>;

struct AttentionKernel {
  std::string name;            // "fa2", "fa3", "block_sparse"
  std::string source;          // where the chosen GPU's numbers come from
  KernelWork work = KernelWork::allowed_pairs;
  bool sparse_index = false;   // runs vertical-slash / block-sparse indices
  RateCurve fwd_full, fwd_causal, bwd_full, bwd_causal;

  const RateCurve& curve(bool backward, bool causal) const {
    return backward ? (causal ? bwd_causal : bwd_full) : (causal ? fwd_causal : fwd_full);
  }
};

const char* to_string(KernelWork w);

// Reads a kernel file and picks the entry of `gpu` (matched on gpu.model);
// throws ConfigError naming the file and key when no entry lists that GPU.
AttentionKernel parse_attention_kernel(const JsonReader& r, const GpuSpec& gpu);
// The same for a kernel named under configs/kernels/ (or a .json path).
AttentionKernel load_attention_kernel(const ConfigStore& store, const std::string& name, const GpuSpec& gpu);

}  // namespace rm
