#include "runtime/tensor_store.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "runtime/buffer_instances.hpp"

namespace rm::runtime {

namespace {
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

int64_t memory_needed(const schedule::Schedule& s, int rank, int layers) {
  int64_t total = 0;
  for (const auto& b : s.buffers)
    if (b.rank == rank) total += aligned(b.bytes() * copies_of(b, layers));
  return total;
}

void TensorStore::Free::operator()(std::byte* p) const { std::free(p); }

TensorStore::TensorStore(const schedule::Schedule& s, int rank, int layers)
    : rank_(rank), offset_(s.buffers.size(), -1), size_(s.buffers.size(), 0), copies_(s.buffers.size(), 0) {
  for (const auto& b : s.buffers) {
    if (b.rank != rank) continue;
    offset_[size_t(b.id)] = total_;
    size_[size_t(b.id)] = b.bytes();
    copies_[size_t(b.id)] = copies_of(b, layers);
    total_ += aligned(b.bytes() * copies_[size_t(b.id)]);
  }
  if (total_ > 0) {
    void* p = std::aligned_alloc(size_t(kAlign), size_t(total_));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, size_t(total_));
    memory_.reset(static_cast<std::byte*>(p));
  }
}

std::span<std::byte> TensorStore::bytes(int buffer, int copy) {
  if (buffer < 0 || size_t(buffer) >= offset_.size() || offset_[size_t(buffer)] < 0)
    throw std::out_of_range("buffer " + std::to_string(buffer) + " is not on rank " + std::to_string(rank_));
  const int n = copies_[size_t(buffer)];
  if (copy >= n) throw std::out_of_range("buffer " + std::to_string(buffer) + " has " + std::to_string(n) + " copies");
  std::byte* base = memory_.get() + offset_[size_t(buffer)];
  const int64_t one = size_[size_t(buffer)];
  if (copy < 0) return {base, size_t(one * n)};
  return {base + one * copy, size_t(one)};
}

}  // namespace rm::runtime
