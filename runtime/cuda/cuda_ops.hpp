// The small device kernels the cuda backend needs around the attention tiles
// and cuBLAS (runtime/cuda/cuda_ops.cu): dtype conversion (bf16 <-> fp32, with
// zeros past a short source), dQ accumulation, the element-wise sum of several
// buffers (multi-read sends, emulated reductions), row copies through device
// row-index arrays (all-to-all packing), fills and the read pass of the dense
// layer's elementwise ops. Every call enqueues on `stream` and returns; launch
// errors throw CudaError. No Schedule types here, so nvcc compiles it alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rm::runtime::dev {

enum class Elem : uint8_t { bf16, fp32, int32 };
int elem_bytes(Elem t);

// dst[i] = src[i] for i < have, 0 for have <= i < n, converted from st to dt
// (fp32 -> bf16 rounds to nearest even, as kernels/bf16.hpp; int32 -> fp32 exact).
void convert(const void* src, Elem st, int64_t have, void* dst, Elem dt, int64_t n, cudaStream_t stream);

// acc[i] = bf16(part[i] + (merge ? acc[i] : 0)), the sum in fp32 (dQ of a ring step).
void add_narrow(const float* part, uint16_t* acc, int64_t n, bool merge, cudaStream_t stream);

// out[i] = sum over k < count of in[k][i], in fp32, stored in t (bf16 rounded once).
// in: a host array of `count` device pointers, all of dtype t; out may be one of them.
inline constexpr int kMaxSumInputs = 64;
void sum(const void* const* in, int count, Elem t, void* out, int64_t n, cudaStream_t stream);

// dst row dst_rows[i] (or i when null) = src row src_rows[i] (or i), for i < rows;
// rows of row_elems elements, converted from st to dt. Index arrays are on the device.
void copy_rows(const void* src, Elem st, const int64_t* src_rows, void* dst, Elem dt, const int64_t* dst_rows,
               int64_t rows, int64_t row_elems, cudaStream_t stream);

void fill(float* p, float value, int64_t n, cudaStream_t stream);

// Folds every 8-byte word of [p, p + bytes) into *sink: reads the buffer once, as
// the cpu backend's read pass does (the memory traffic the model charges).
void read_pass(const void* p, int64_t bytes, unsigned long long* sink, cudaStream_t stream);

}  // namespace rm::runtime::dev
