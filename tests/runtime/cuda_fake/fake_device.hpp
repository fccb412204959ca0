// A host "GPU" for testing the runtime's cuda backend without one: the CUDA
// runtime, cuBLAS and kernels/cuda calls it makes, with streams as queues that
// run only when the host synchronises, in a seeded random order that honours
// nothing but stream order and event waits — so a missing wait shows as wrong
// results or as a dependency that starts before its producer ends (event times
// are a logical clock: one tick per queued item). A state where no stream can
// run is a device deadlock and throws. Kernels run on kernels/cpu.
#pragma once

#include <cstdint>
#include <functional>

#include "cuda_runtime_api.h"

namespace fake {

// The order in which runnable streams are picked from now on.
void set_seed(uint64_t seed);
// Queues `work` on stream s (nullptr: runs at once).
void enqueue(cudaStream_t s, std::function<void()> work);

}  // namespace fake
