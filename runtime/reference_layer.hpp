#pragma once
// The numerical ground truth of --check for the `layer` scope: one decoder
// layer (RMSNorm, QKV, attention, O projection + residual, RMSNorm, gate-up,
// SwiGLU, down projection + residual) forward and backward over the whole
// sequence in one process, on the inputs the ranks seed (dense_layer.hpp):
// reference_layer in fp32 (OpenBLAS GEMMs, kernels::cpu attention as one tile
// per batch), brute_force_layer in fp64 from plain loops and the mask alone
// (kernels::attends), the oracle the first is tested against, whose own
// gradients are tested against finite differences of brute_force_layer_output.
#include <cstdint>
#include <vector>

#include "kernels/tile.hpp"
#include "runtime/reference.hpp"
#include "sim/config/model.hpp"

namespace rm::runtime {

struct LayerProblem {
  int64_t batch = 1;
  int32_t seq_len = 0;
  int64_t hidden = 0, intermediate = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true, backward = true;
  uint64_t seed = 1;
  int layer = 0;               // whose weights (weight_value)
  kernels::SparseIndex index;  // dense, or one entry per global query head
  Model model() const;         // the sizes as a Model (for WeightLayout)
};

struct LayerInputs {
  std::vector<float> x, dy;  // [batch][seq_len][hidden]
  std::vector<float> weights;  // WeightLayout order
};
// x, dY and the weights as dense_input_value / weight_value give them.
LayerInputs seeded_layer_inputs(const LayerProblem& p);

struct LayerResult {
  std::vector<float> y, dx;  // [batch][seq_len][hidden]; dx empty without backward
  std::vector<float> wgrad;  // WeightLayout order; the norm weights' entries are 0 (no gradient)
  ReferenceResult attention;  // O, LSE, dQ, dK, dV of the layer's attention (reference.hpp's layout)
};

LayerResult reference_layer(const LayerProblem& p, const LayerInputs& in);
// fp64 throughout, rounded to fp32 at the end; O(S^2) attention: tiny sizes only.
LayerResult brute_force_layer(const LayerProblem& p, const LayerInputs& in);
// The fp64 forward alone: y for inputs x and weights (finite differences in tests).
std::vector<double> brute_force_layer_output(const LayerProblem& p, const std::vector<double>& x,
                                             const std::vector<double>& weights);

// All throw std::invalid_argument naming the field on bad sizes.

}  // namespace rm::runtime
