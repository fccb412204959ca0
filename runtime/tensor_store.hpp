// The tensors of one rank: every buffer the Schedule declares on it, in all the
// copies its `instances` asks for, allocated once (zeroed, 64-byte aligned)
// before anything runs. Copies of one buffer are contiguous, so "every copy"
// (an op outside the layers reading a per-layer buffer) is one span.
// memory_needed() is known before allocating, so a run that cannot fit is
// refused with the figure instead of failing half-way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace rm::runtime {

// Bytes the buffers of `rank` take in all their copies.
int64_t memory_needed(const schedule::Schedule& s, int rank, int layers);

class TensorStore {
 public:
  TensorStore(const schedule::Schedule& s, int rank, int layers);

  int rank() const { return rank_; }
  // copy -1: every copy (contiguous). Throws std::out_of_range for another rank's buffer.
  std::span<std::byte> bytes(int buffer, int copy);
  template <class T>
  std::span<T> as(int buffer, int copy) {
    auto b = bytes(buffer, copy);
    return {reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)};
  }
  int64_t total_bytes() const { return total_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  int rank_ = 0;
  int64_t total_ = 0;
  std::unique_ptr<std::byte, Free> memory_;
  std::vector<int64_t> offset_, size_;  // per buffer id (-1: not this rank's): first byte, bytes of one copy
  std::vector<int> copies_;
};

}  // namespace rm::runtime
