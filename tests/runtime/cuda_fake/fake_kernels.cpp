// kernels/cuda and runtime/cuda/cuda_ops.hpp on the fake device: the same
// calls, queued on the fake stream, computed by kernels/cpu and plain loops.
#include <limits>
#include <string>

#include "fake_device.hpp"
#include "kernels/bf16.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/cuda/attention_cuda.hpp"
#include "kernels/softmax_merge.hpp"
#include "runtime/cuda/cuda_error.hpp"
#include "runtime/cuda/cuda_ops.hpp"

namespace rm::kernels::cuda {

bool device_available() { return true; }

// memory_ holds a host copy of the plan, so the view stays valid.
DevicePlan::DevicePlan(const TilePlan& plan, cudaStream_t) : shape_(plan.shape), causal_(plan.causal) {
  auto* copy = new TilePlan(plan);
  memory_ = copy;
  view_ = view_of(*copy);
}
DevicePlan::~DevicePlan() { delete static_cast<TilePlan*>(memory_); }

AttentionParams DevicePlan::bind(AttentionParams params) const {
  if (params.heads_q != shape_.heads_q || params.heads_kv != shape_.heads_kv || params.head_dim != shape_.head_dim ||
      params.rows_q != shape_.rows_q || params.rows_k != shape_.rows_k || params.causal != causal_)
    throw std::invalid_argument("fake DevicePlan: params were made for a different tile");
  params.plan = view_;
  return params;
}

void attention_forward(const AttentionParams& params, cudaStream_t stream) {
  if (params.dtype != DType::bf16) throw std::invalid_argument("fake cuda attention: inputs must be bf16");
  fake::enqueue(stream, [params] { cpu::attention_forward(params); });
}

void attention_backward(const AttentionParams& params, cudaStream_t stream) {
  if (params.dtype != DType::bf16) throw std::invalid_argument("fake cuda attention: inputs must be bf16");
  fake::enqueue(stream, [params] { cpu::attention_backward(params); });
}

void merge_partial(float* acc_out, float* acc_lse, const float* part_out, const float* part_lse, std::int64_t rows,
                   int head_dim, cudaStream_t stream) {
  fake::enqueue(stream, [=] {
    const auto n = size_t(rows) * size_t(head_dim);
    kernels::merge_partial({acc_out, n}, {acc_lse, size_t(rows)}, {part_out, n}, {part_lse, size_t(rows)}, head_dim);
  });
}

}  // namespace rm::kernels::cuda

namespace rm::runtime::dev {
namespace {

float load(const void* p, Elem t, int64_t i) {
  switch (t) {
    case Elem::bf16: return kernels::from_bf16(static_cast<const uint16_t*>(p)[i]);
    case Elem::fp32: return static_cast<const float*>(p)[i];
    default: return float(static_cast<const int32_t*>(p)[i]);
  }
}
void store(void* p, Elem t, int64_t i, float v) {
  switch (t) {
    case Elem::bf16: static_cast<uint16_t*>(p)[i] = kernels::to_bf16(v); break;
    case Elem::fp32: static_cast<float*>(p)[i] = v; break;
    default: static_cast<int32_t*>(p)[i] = int32_t(v); break;
  }
}

}  // namespace

int elem_bytes(Elem t) { return t == Elem::bf16 ? 2 : 4; }

void convert(const void* src, Elem st, int64_t have, void* dst, Elem dt, int64_t n, cudaStream_t stream) {
  fake::enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) store(dst, dt, i, i < have ? load(src, st, i) : 0.f);
  });
}

void add_narrow(const float* part, uint16_t* acc, int64_t n, bool merge, cudaStream_t stream) {
  fake::enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) acc[i] = kernels::to_bf16(part[i] + (merge ? kernels::from_bf16(acc[i]) : 0.f));
  });
}

void sum(const void* const* in, int count, Elem t, void* out, int64_t n, cudaStream_t stream) {
  if (count < 1 || count > kMaxSumInputs) throw CudaError("fake sum: " + std::to_string(count) + " inputs");
  std::vector<const void*> p(in, in + count);
  fake::enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) {
      float s = 0;
      for (const void* x : p) s += load(x, t, i);
      store(out, t, i, s);
    }
  });
}

void copy_rows(const void* src, Elem st, const int64_t* src_rows, void* dst, Elem dt, const int64_t* dst_rows, int64_t rows,
               int64_t row_elems, cudaStream_t stream) {
  fake::enqueue(stream, [=] {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t e = 0; e < row_elems; ++e)
        store(dst, dt, (dst_rows ? dst_rows[r] : r) * row_elems + e, load(src, st, (src_rows ? src_rows[r] : r) * row_elems + e));
  });
}

void fill(float* p, float value, int64_t n, cudaStream_t stream) {
  fake::enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) p[i] = value;
  });
}

void read_pass(const void* p, int64_t bytes, unsigned long long* sink, cudaStream_t stream) {
  fake::enqueue(stream, [=] {
    for (int64_t i = 0; i < bytes / 8; ++i) *sink += static_cast<const unsigned long long*>(p)[i];
  });
}

}  // namespace rm::runtime::dev
