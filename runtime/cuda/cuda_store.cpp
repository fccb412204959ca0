#include "runtime/cuda/cuda_store.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "runtime/cuda/cuda_error.hpp"

namespace rm::runtime {

CudaStore::CudaStore(const schedule::Schedule& s, TensorStore& host)
    : rank_(host.rank()), total_(host.total_bytes()), offset_(s.buffers.size(), -1), size_(s.buffers.size(), 0),
      copies_(s.buffers.size(), 0) {
  // The host store's spans give the offsets: one source of truth for the layout.
  for (const auto& b : s.buffers) {
    if (b.rank != rank_) continue;
    if (first_ < 0) first_ = b.id;
    const auto all = host.bytes(b.id, -1), one = host.bytes(b.id, 0);
    offset_[size_t(b.id)] = all.data() - host.bytes(first_, -1).data();
    size_[size_t(b.id)] = int64_t(one.size());
    copies_[size_t(b.id)] = one.empty() ? 0 : int(all.size() / one.size());
  }
  if (total_ > 0)
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&memory_), size_t(total_)),
               "rank " + std::to_string(rank_) + ": cudaMalloc of its buffers (" + std::to_string(total_) + " bytes)");
}

CudaStore::~CudaStore() { cudaFree(memory_); }

std::byte* CudaStore::bytes(int buffer, int copy) const {
  if (buffer < 0 || size_t(buffer) >= offset_.size() || offset_[size_t(buffer)] < 0)
    throw std::out_of_range("buffer " + std::to_string(buffer) + " is not on rank " + std::to_string(rank_));
  const int n = copies_[size_t(buffer)];
  if (copy >= n) throw std::out_of_range("buffer " + std::to_string(buffer) + " has " + std::to_string(n) + " copies");
  return memory_ + offset_[size_t(buffer)] + (copy < 0 ? 0 : size_[size_t(buffer)] * copy);
}

int64_t CudaStore::size(int buffer, int copy) const {
  (void)bytes(buffer, copy);  // the same checks
  return copy < 0 ? size_[size_t(buffer)] * copies_[size_t(buffer)] : size_[size_t(buffer)];
}

std::byte* CudaStore::host_base(TensorStore& host) const {
  if (host.rank() != rank_ || host.total_bytes() != total_)
    throw std::logic_error("cuda store of rank " + std::to_string(rank_) + ": not the host store it mirrors");
  return first_ < 0 ? nullptr : host.bytes(first_, -1).data();
}

void CudaStore::upload(TensorStore& host) const {
  if (total_ > 0)
    cuda_check(cudaMemcpy(memory_, host_base(host), size_t(total_), cudaMemcpyHostToDevice),
               "rank " + std::to_string(rank_) + ": upload of the seeded inputs");
}

void CudaStore::download(TensorStore& host) const {
  if (total_ > 0)
    cuda_check(cudaMemcpy(host_base(host), memory_, size_t(total_), cudaMemcpyDeviceToHost),
               "rank " + std::to_string(rank_) + ": download of the outputs");
}

}  // namespace rm::runtime
