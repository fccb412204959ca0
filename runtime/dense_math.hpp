// What the runtime's dense parts (dense_layer: a decoder layer; dense_step: the
// embedding, head and loss of a step) and their single-process references share:
// OpenBLAS's row-major GEMM as they call it, and how they recognise a layer's
// input activations among the Schedule's buffers.
#pragma once

#include <cstdint>
#include <string_view>

namespace rm::runtime {

// C[m x n] (+)= A[m x k] B[k x n] with A's or B's transpose as asked, row-major;
// beta 0 overwrites C, 1 adds to it.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta, float* c);

// Whether a buffer named `name` holds a layer's input activations: x{layer}.
bool is_layer_input(std::string_view name);

}  // namespace rm::runtime
