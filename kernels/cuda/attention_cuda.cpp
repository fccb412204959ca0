#include "kernels/cuda/attention_cuda.hpp"

#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/launch.hpp"

namespace rm::kernels::cuda {
namespace detail {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string("cuda attention: ") + what + ": " + cudaGetErrorString(err));
}

}  // namespace detail
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("cuda attention: " + what); }

void require_aligned(const void* p, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) fail(std::string(name) + " is not 16-byte aligned");
}

void validate(const AttentionParams& p, bool backward) {
  if (!p.plan.on_device) fail("params are not bound to a DevicePlan");
  if (p.head_dim != 64 && p.head_dim != 128) fail("head_dim " + std::to_string(p.head_dim) + " is not supported");
  if (p.dtype != DType::bf16) fail("inputs must be bf16 on the GPU");
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) fail("heads_q must be a multiple of heads_kv");
  require_aligned(p.q, "q");
  require_aligned(p.k, "k");
  require_aligned(p.v, "v");
  if (backward) {
    if (p.dout == nullptr || p.out_in == nullptr || p.lse_in == nullptr || p.dq == nullptr || p.dk == nullptr ||
        p.dv == nullptr)
      fail("backward tensors missing");
    require_aligned(p.dout, "dout");
    require_aligned(p.dq, "dq");
  } else {
    if (p.out == nullptr || p.lse == nullptr) fail("out/lse missing");
    require_aligned(p.out, "out");
  }
}

// Byte offset of the next array, 16-byte aligned, in the plan's one allocation.
std::size_t place(std::size_t& used, std::size_t bytes) {
  const std::size_t at = (used + 15) / 16 * 16;
  used = at + bytes;
  return at;
}

}  // namespace

bool device_available() {
  // Asked once: without a driver each query is slow, and the answer cannot change.
  static const bool available = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the "no driver" error
      return false;
    }
    return count > 0;
  }();
  return available;
}

DevicePlan::DevicePlan(const TilePlan& plan, cudaStream_t stream) : shape_(plan.shape), causal_(plan.causal) {
  struct Array {
    const void* data;
    std::size_t bytes;
    std::size_t at;
  };
  auto bytes_of = [](const auto& v) { return v.size() * sizeof(v[0]); };
  std::vector<Array> arrays{{plan.q_pos.data(), bytes_of(plan.q_pos), 0},
                            {plan.k_pos.data(), bytes_of(plan.k_pos), 0},
                            {plan.seg_begin.data(), bytes_of(plan.seg_begin), 0},
                            {plan.seg_count.data(), bytes_of(plan.seg_count), 0},
                            {plan.item_offsets.data(), bytes_of(plan.item_offsets), 0},
                            {plan.items.data(), bytes_of(plan.items), 0},
                            {plan.gathered_rows.data(), bytes_of(plan.gathered_rows), 0}};
  std::size_t used = 0;
  for (auto& a : arrays) a.at = place(used, a.bytes);
  std::vector<unsigned char> host(used);
  for (const auto& a : arrays)
    if (a.bytes > 0) std::memcpy(host.data() + a.at, a.data, a.bytes);
  detail::check(cudaMalloc(&memory_, std::max<std::size_t>(used, 16)), "plan allocation");
  try {
    detail::check(cudaMemcpyAsync(memory_, host.data(), used, cudaMemcpyHostToDevice, stream), "plan upload");
    detail::check(cudaStreamSynchronize(stream), "plan upload");  // host buffer goes out of scope
  } catch (...) {
    cudaFree(memory_);
    throw;
  }
  auto at = [&](int i) { return static_cast<unsigned char*>(memory_) + arrays[static_cast<std::size_t>(i)].at; };
  view_.q_pos = reinterpret_cast<const std::int32_t*>(at(0));
  view_.k_pos = reinterpret_cast<const std::int32_t*>(at(1));
  view_.seg_begin = reinterpret_cast<const std::int32_t*>(at(2));
  view_.seg_count = reinterpret_cast<const std::int32_t*>(at(3));
  view_.item_offsets = reinterpret_cast<const std::int64_t*>(at(4));
  view_.items = reinterpret_cast<const PlanItem*>(at(5));
  view_.gathered_rows = reinterpret_cast<const std::int32_t*>(at(6));
  view_.segments = plan.segments();
  view_.per_head = plan.per_head;
  view_.on_device = true;
}

DevicePlan::~DevicePlan() { cudaFree(memory_); }

AttentionParams DevicePlan::bind(AttentionParams params) const {
  if (params.heads_q != shape_.heads_q || params.heads_kv != shape_.heads_kv || params.head_dim != shape_.head_dim ||
      params.rows_q != shape_.rows_q || params.rows_k != shape_.rows_k || params.causal != causal_)
    fail("params were made for a different tile than this DevicePlan");
  params.plan = view_;
  return params;
}

void attention_forward(const AttentionParams& params, cudaStream_t stream) {
  validate(params, false);
  if (params.plan.segments == 0) return;
  detail::launch_forward(params, stream);
}

void attention_backward(const AttentionParams& params, cudaStream_t stream) {
  validate(params, true);
  const auto kv_elems = static_cast<std::size_t>(params.heads_kv) * static_cast<std::size_t>(params.rows_k) *
                        static_cast<std::size_t>(params.head_dim);
  if (!params.accumulate) {  // dK, dV are accumulated with atomics; dQ is written by its CTA
    detail::check(cudaMemsetAsync(params.dk, 0, kv_elems * sizeof(float), stream), "dk clear");
    detail::check(cudaMemsetAsync(params.dv, 0, kv_elems * sizeof(float), stream), "dv clear");
  }
  if (params.plan.segments == 0) return;
  detail::launch_backward(params, stream);
}

void merge_partial(float* acc_out, float* acc_lse, const float* part_out, const float* part_lse, std::int64_t rows,
                   int head_dim, cudaStream_t stream) {
  if (rows < 0 || head_dim <= 0) fail("merge_partial: rows must be >= 0 and head_dim > 0");
  if (rows > 0 && (acc_out == nullptr || acc_lse == nullptr || part_out == nullptr || part_lse == nullptr))
    fail("merge_partial: missing tensors");
  detail::launch_merge(acc_out, acc_lse, part_out, part_lse, rows, head_dim, stream);
}

}  // namespace rm::kernels::cuda
