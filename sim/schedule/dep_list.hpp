// The dependencies of one op: a small vector of op ids that keeps up to
// kInline of them in place and goes to the heap only beyond that. Nearly every
// op of a generated Schedule has at most two dependencies, so a step of tens
// of millions of ops makes no per-op heap allocation for them. Ids are held in
// 32 bits (a Schedule holds at most kMaxOps ops: the builder and the readers
// check) and the list is 12 bytes, so that an Op stays at 48 (schedule.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <span>
#include <vector>

namespace rm::schedule {

using OpId = int64_t;
using DepId = int32_t;  // an op id as a dependency list holds it
inline constexpr OpId kMaxOps = std::numeric_limits<DepId>::max();  // ids are below it

class DepList {
 public:
  using value_type = DepId;
  using iterator = DepId*;
  using const_iterator = const DepId*;
  using size_type = size_t;
  static constexpr uint32_t kInline = 2;

  DepList() = default;
  DepList(std::initializer_list<OpId> ids) { assign(ids.begin(), ids.size()); }
  // Implicit, so that builder calls and tests can pass a std::vector.
  DepList(const std::vector<OpId>& ids) { assign(ids.data(), ids.size()); }  // NOLINT(google-explicit-constructor)
  DepList(std::span<const OpId> ids) { assign(ids.data(), ids.size()); }     // NOLINT(google-explicit-constructor)
  DepList(const DepList& o) { assign(o.data(), o.size()); }
  DepList(DepList&& o) noexcept { steal(o); }
  DepList& operator=(const DepList& o) {
    if (this != &o) {
      clear();
      assign(o.data(), o.size());
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
    clear();
    assign(ids.begin(), ids.size());
    return *this;
  }
  ~DepList() { release(); }

  size_t size() const { return size_ & kSizeMask; }
  bool empty() const { return size() == 0; }
  size_t capacity() const { return on_heap() ? size_t(heap()[0]) : kInline; }
  // Bytes this list holds outside the op (0 while it fits in place).
  size_t heap_bytes() const { return on_heap() ? (capacity() + 1) * sizeof(DepId) : 0; }

  DepId* data() { return on_heap() ? heap() + 1 : reinterpret_cast<DepId*>(words_); }
  const DepId* data() const { return on_heap() ? heap() + 1 : reinterpret_cast<const DepId*>(words_); }
  DepId* begin() { return data(); }
  DepId* end() { return data() + size(); }
  const DepId* begin() const { return data(); }
  const DepId* end() const { return data() + size(); }
  DepId& operator[](size_t i) { return data()[i]; }
  OpId operator[](size_t i) const { return data()[i]; }
  OpId back() const { return data()[size() - 1]; }

  void clear() { size_ &= kHeapBit; }
  void reserve(size_t n) {
    if (n > capacity()) grow(n);
  }
  void push_back(OpId id) {
    const size_t n = size();
    if (n == capacity()) grow(n * 2);
    data()[n] = static_cast<DepId>(id);
    ++size_;
  }

  template <class V>
  friend bool equal_ids(const DepList& a, const V& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](DepId x, auto y) { return OpId(x) == OpId(y); });
  }
  friend bool operator==(const DepList& a, const DepList& b) { return equal_ids(a, b); }
  friend bool operator==(const DepList& a, const std::vector<OpId>& b) { return equal_ids(a, b); }

 private:
  static constexpr uint32_t kHeapBit = 1u << 31, kSizeMask = kHeapBit - 1;
  bool on_heap() const { return (size_ & kHeapBit) != 0; }
  // On the heap the two words hold the block's address; the block is its
  // capacity, then the ids (4-byte words, so the list needs no 8-byte alignment).
  DepId* heap() const {
    DepId* p;
    std::memcpy(&p, words_, sizeof p);
    return p;
  }
  template <class T>
  void assign(const T* ids, size_t n) {
    reserve(n);
    DepId* d = data();
    for (size_t k = 0; k < n; ++k) d[k] = static_cast<DepId>(ids[k]);
    size_ = (size_ & kHeapBit) | static_cast<uint32_t>(n);
  }
  void grow(size_t n) {
    auto* p = new DepId[n + 1];
    p[0] = static_cast<DepId>(n);
    const size_t k = size();
    if (k > 0) std::memcpy(p + 1, data(), k * sizeof(DepId));
    release();
    std::memcpy(words_, &p, sizeof p);
    size_ = kHeapBit | static_cast<uint32_t>(k);
  }
  void release() {
    if (on_heap()) delete[] heap();
    size_ &= kSizeMask;
  }
  void steal(DepList& o) {
    std::memcpy(words_, o.words_, sizeof words_);
    size_ = o.size_;
    o.size_ = 0;
  }

  static_assert(sizeof(DepId*) <= 2 * sizeof(uint32_t));
  uint32_t words_[2] = {};  // kInline ids in place, or the heap block's address
  uint32_t size_ = 0;       // the count, and kHeapBit while on the heap
};

static_assert(sizeof(DepList) == 12 && alignof(DepList) == 4);

}  // namespace rm::schedule
