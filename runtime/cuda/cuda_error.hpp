// CUDA, cuBLAS and NCCL statuses turned into one exception type of the cuda
// backend, naming what failed; the launcher prints it as the rank's one line.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace rm::runtime {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw CudaError(what + ": " + cudaGetErrorString(e));
}

}  // namespace rm::runtime
