// The device twin of TensorStore (runtime/tensor_store.hpp): one cudaMalloc per
// rank holding every buffer of the rank in all its copies, at the very offsets
// of the host store it mirrors — so seeding stays on the host (seed_inputs
// writes the host store) and upload / download are one copy each way.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/tensor_store.hpp"

namespace rm::runtime {

class CudaStore {
 public:
  // Mirrors the layout of `host`, the store of one rank of `s` (offsets are copied). Throws CudaError.
  CudaStore(const schedule::Schedule& s, TensorStore& host);
  ~CudaStore();
  CudaStore(const CudaStore&) = delete;
  CudaStore& operator=(const CudaStore&) = delete;

  int rank() const { return rank_; }
  // Device pointer of copy `copy` of `buffer` (-1: every copy, contiguous); throws
  // std::out_of_range for another rank's buffer, as TensorStore does.
  std::byte* bytes(int buffer, int copy) const;
  // Bytes of that span.
  int64_t size(int buffer, int copy) const;
  int64_t total_bytes() const { return total_; }

  // Whole-store copies between `host` (the store this mirrors) and the device, synchronous.
  void upload(TensorStore& host) const;
  void download(TensorStore& host) const;

 private:
  std::byte* host_base(TensorStore& host) const;
  int rank_ = 0;
  int64_t total_ = 0;
  std::byte* memory_ = nullptr;
  std::vector<int64_t> offset_, size_;  // per buffer id (-1: not this rank's): first byte, bytes of one copy
  std::vector<int> copies_;
  int first_ = -1;  // the rank's first buffer: offset 0 in both stores
};

}  // namespace rm::runtime
