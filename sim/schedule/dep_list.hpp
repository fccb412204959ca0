// The dependencies of one op: a small vector of op ids that keeps up to
// kInline of them in place and goes to the heap only beyond that. Nearly every
// op of a generated Schedule has at most two dependencies, so a step of tens
// of millions of ops makes no per-op heap allocation for them (a
// std::vector<OpId> costs the same 24 bytes in the op plus a heap block of
// 32 bytes or more, and a malloc and free per op while generating).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

namespace rm::schedule {

using OpId = int64_t;

class DepList {
 public:
  using value_type = OpId;
  using iterator = OpId*;
  using const_iterator = const OpId*;
  using size_type = size_t;
  static constexpr uint32_t kInline = 2;

  DepList() = default;
  DepList(std::initializer_list<OpId> ids) { assign(ids.begin(), ids.size()); }
  // Implicit, so that builder calls and tests can pass a std::vector.
  DepList(const std::vector<OpId>& ids) { assign(ids.data(), ids.size()); }  // NOLINT(google-explicit-constructor)
  DepList(std::span<const OpId> ids) { assign(ids.data(), ids.size()); }     // NOLINT(google-explicit-constructor)
  DepList(const DepList& o) { assign(o.data(), o.size_); }
  DepList(DepList&& o) noexcept { steal(o); }
  DepList& operator=(const DepList& o) {
    if (this != &o) {
      size_ = 0;
      assign(o.data(), o.size_);
    }
    return *this;
  }
  DepList& operator=(DepList&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  DepList& operator=(std::initializer_list<OpId> ids) {
    size_ = 0;
    assign(ids.begin(), ids.size());
    return *this;
  }
  ~DepList() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  // Bytes this list holds outside the op (0 while it fits in place).
  size_t heap_bytes() const { return on_heap() ? capacity_ * sizeof(OpId) : 0; }

  OpId* data() { return on_heap() ? heap_ : local_; }
  const OpId* data() const { return on_heap() ? heap_ : local_; }
  OpId* begin() { return data(); }
  OpId* end() { return data() + size_; }
  const OpId* begin() const { return data(); }
  const OpId* end() const { return data() + size_; }
  OpId& operator[](size_t i) { return data()[i]; }
  OpId operator[](size_t i) const { return data()[i]; }
  OpId back() const { return data()[size_ - 1]; }
  operator std::span<const OpId>() const { return {data(), size_}; }  // NOLINT(google-explicit-constructor)

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void push_back(OpId id) {
    if (size_ == capacity_) grow(size_t{capacity_} * 2);
    data()[size_++] = id;
  }

  friend bool operator==(const DepList& a, const DepList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const DepList& a, const std::vector<OpId>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return capacity_ > kInline; }
  void assign(const OpId* ids, size_t n) {
    reserve(n);
    if (n > 0) std::memcpy(data(), ids, n * sizeof(OpId));
    size_ = static_cast<uint32_t>(n);
  }
  void grow(size_t n) {
    auto* p = new OpId[n];
    if (size_ > 0) std::memcpy(p, data(), size_ * sizeof(OpId));
    release();
    heap_ = p;
    capacity_ = static_cast<uint32_t>(n);
  }
  void release() {
    if (on_heap()) delete[] heap_;
    capacity_ = kInline;
  }
  void steal(DepList& o) {
    size_ = o.size_;
    capacity_ = o.capacity_;
    if (o.on_heap()) {
      heap_ = o.heap_;
    } else {
      std::memcpy(local_, o.local_, sizeof local_);
    }
    o.size_ = 0;
    o.capacity_ = kInline;
  }

  union {
    OpId local_[kInline] = {};
    OpId* heap_;
  };
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
};

static_assert(sizeof(DepList) == 24);

}  // namespace rm::schedule
