// Device side of cuda_ops.hpp: grid-stride element loops, one thread per element
// (or per 8-byte word), fp32 arithmetic as the cpu backend does it.
#include <cuda_bf16.h>

#include <string>

#include "runtime/cuda/cuda_error.hpp"
#include "runtime/cuda/cuda_ops.hpp"

namespace rm::runtime::dev {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride beyond: enough to fill any GPU

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

void launched(const char* what) { cuda_check(cudaGetLastError(), std::string("cuda backend: ") + what + " launch"); }

__device__ __forceinline__ float load_elem(const void* p, Elem t, int64_t i) {
  switch (t) {
    case Elem::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Elem::fp32: return static_cast<const float*>(p)[i];
    default: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  }
}

__device__ __forceinline__ void store_elem(void* p, Elem t, int64_t i, float v) {
  switch (t) {
    case Elem::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case Elem::fp32: static_cast<float*>(p)[i] = v; break;
    default: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
  }
}

__global__ void convert_kernel(const void* src, Elem st, int64_t have, void* dst, Elem dt, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store_elem(dst, dt, i, i < have ? load_elem(src, st, i) : 0.f);
}

// Same dtype, no padding: a raw copy keeps int32 and NaN payloads bit-exact.
__global__ void copy_bits_kernel(const void* src, int64_t have, void* dst, int width, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (width == 2) static_cast<uint16_t*>(dst)[i] = i < have ? static_cast<const uint16_t*>(src)[i] : uint16_t(0);
    else static_cast<uint32_t*>(dst)[i] = i < have ? static_cast<const uint32_t*>(src)[i] : 0u;
  }
}

__global__ void add_narrow_kernel(const float* part, __nv_bfloat16* acc, int64_t n, bool merge) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] = __float2bfloat16_rn(part[i] + (merge ? __bfloat162float(acc[i]) : 0.f));
}

struct SumInputs {
  const void* p[kMaxSumInputs];
  int count;
};

__global__ void sum_kernel(SumInputs in, Elem t, void* out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < in.count; ++k) s += load_elem(in.p[k], t, i);
    store_elem(out, t, i, s);
  }
}

__global__ void copy_rows_kernel(const void* src, Elem st, const int64_t* src_rows, void* dst, Elem dt,
                                 const int64_t* dst_rows, int64_t rows, int64_t row_elems) {
  const int64_t n = rows * row_elems;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / row_elems, e = i % row_elems;
    const int64_t from = (src_rows ? src_rows[r] : r) * row_elems + e;
    const int64_t to = (dst_rows ? dst_rows[r] : r) * row_elems + e;
    store_elem(dst, dt, to, load_elem(src, st, from));
  }
}

__global__ void copy_rows_bits_kernel(const uint16_t* src, const int64_t* src_rows, uint16_t* dst,
                                      const int64_t* dst_rows, int64_t rows, int64_t row_halves) {
  const int64_t n = rows * row_halves;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / row_halves, e = i % row_halves;
    dst[(dst_rows ? dst_rows[r] : r) * row_halves + e] = src[(src_rows ? src_rows[r] : r) * row_halves + e];
  }
}

__global__ void fill_kernel(float* p, float value, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__global__ void read_pass_kernel(const unsigned long long* w, int64_t words, unsigned long long* sink) {
  unsigned long long s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += int64_t(gridDim.x) * blockDim.x)
    s += w[i];
  // One atomic per warp keeps the pass bound by memory, not by the atomics.
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (threadIdx.x % 32 == 0) atomicAdd(sink, s);
}

}  // namespace

int elem_bytes(Elem t) { return t == Elem::bf16 ? 2 : 4; }

void convert(const void* src, Elem st, int64_t have, void* dst, Elem dt, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (have > n) have = n;
  if (st == dt) copy_bits_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, have, dst, elem_bytes(dt), n);
  else convert_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, st, have, dst, dt, n);
  launched("convert");
}

void add_narrow(const float* part, uint16_t* acc, int64_t n, bool merge, cudaStream_t stream) {
  if (n <= 0) return;
  add_narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(part, reinterpret_cast<__nv_bfloat16*>(acc), n, merge);
  launched("dQ accumulation");
}

void sum(const void* const* in, int count, Elem t, void* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (count < 1 || count > kMaxSumInputs)
    throw CudaError("cuda backend: a sum of " + std::to_string(count) + " buffers (at most " +
                    std::to_string(kMaxSumInputs) + ")");
  SumInputs args{};
  for (int k = 0; k < count; ++k) args.p[k] = in[k];
  args.count = count;
  sum_kernel<<<blocks_for(n), kThreads, 0, stream>>>(args, t, out, n);
  launched("sum");
}

void copy_rows(const void* src, Elem st, const int64_t* src_rows, void* dst, Elem dt, const int64_t* dst_rows,
               int64_t rows, int64_t row_elems, cudaStream_t stream) {
  if (rows <= 0 || row_elems <= 0) return;
  // Same dtype: move 16-bit halves, exact for every dtype (rows are whole elements).
  if (st == dt) {
    const int64_t halves = row_elems * elem_bytes(st) / 2;
    copy_rows_bits_kernel<<<blocks_for(rows * halves), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(src), src_rows, static_cast<uint16_t*>(dst), dst_rows, rows, halves);
  } else {
    copy_rows_kernel<<<blocks_for(rows * row_elems), kThreads, 0, stream>>>(src, st, src_rows, dst, dt, dst_rows, rows,
                                                                           row_elems);
  }
  launched("row copy");
}

void fill(float* p, float value, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, value, n);
  launched("fill");
}

void read_pass(const void* p, int64_t bytes, unsigned long long* sink, cudaStream_t stream) {
  const int64_t words = bytes / 8;
  if (words <= 0) return;
  read_pass_kernel<<<blocks_for(words), kThreads, 0, stream>>>(static_cast<const unsigned long long*>(p), words, sink);
  launched("read pass");
}

}  // namespace rm::runtime::dev
