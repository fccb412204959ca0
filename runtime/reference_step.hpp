#pragma once
// The numerical ground truth of --check for the `step` scope: one training step
// (embedding, every layer, final RMSNorm, LM head, softmax cross-entropy, their
// backward, the embedding's gradient, AdamW) over every replica's sequences in
// one process, in fp32, on the values the ranks seed (dense_step.hpp,
// dense_layer.hpp): each layer is reference_layer.hpp's, chained; the gradients
// are the whole step's (what the replicas' all-reduce or reduce-scatter yields).
#include <cstdint>
#include <vector>

#include "runtime/reference_layer.hpp"

namespace rm::runtime {

struct StepProblem {
  // Sizes, pattern and seed; batch = every replica's sequences (dp x batch); layer and backward unused.
  LayerProblem layer;
  int layers = 0;
  int64_t vocab = 0;
  bool tied = true;
  std::vector<kernels::SparseIndex> index_by_layer;  // static sparse patterns: layer l's (else layer.index)
  Model model() const;
};

// Parameter blocks as in StepOutputs: 0..layers-1 the layers (WeightLayout), then the embedding (EmbedLayout).
struct StepResult {
  std::vector<float> loss;                        // [sample][position]: per-token loss
  std::vector<std::vector<float>> grad;           // per block: the step's gradient (norm weights: 0)
  std::vector<std::vector<float>> before, after;  // per block: the parameters before and after AdamW (after: bf16-rounded)
};

// On the seeded parameters, or on `params` (per block, e.g. perturbed for finite
// differences). Throws std::invalid_argument naming the field on bad sizes.
StepResult reference_step(const StepProblem& p, const std::vector<std::vector<float>>* params = nullptr);

}  // namespace rm::runtime
