// Send/recv matching as MPI and NCCL do it, one op at a time: the k-th send
// from A to B with tag t meets the k-th recv on B from A with tag t. A key
// stays in the table only while one side has ops waiting (first in, first
// out), so the table holds the pairs in flight, not every pair ever made, and
// stays in cache however long the schedule. Used by match_comms (whole
// Schedules), the streamed run (stream_run.cpp) and its bound-by
// (stream_bound_by.cpp), each with what it keeps of a waiting op.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace rm::schedule {

// splitmix64's finalizer: linear probing needs spread bits.
inline uint64_t mix64(uint64_t h) {
  h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27, h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}
// A tuple of integers, hashed member by member.
template <class Key>
uint64_t tuple_hash(const Key& k) {
  uint64_t h = 0;
  std::apply([&](const auto&... x) { ((h = mix64(h ^ static_cast<uint64_t>(x))), ...); }, k);
  return h;
}

// T: what the caller keeps of a waiting op (its id, or more).
template <class T>
class P2PMatcher {
 public:
  using Key = std::tuple<int, int, int64_t>;  // sender, receiver, tag

  // An op of `key` on the recv side (else the send side) arrives: the other
  // side's oldest waiting op, or nullopt when none waits (then this one waits).
  std::optional<T> add(const Key& k, bool recv, const T& value) {
    const uint64_t h = tuple_hash(k);
    size_t i = find(k, h);
    Entry& e = table_[i];
    if (!e.used) {  // a new key: the op waits
      e = {k, h, push_node(value), -1, recv, true};
      e.tail = e.head;
      if (++live_ * 2 > table_.size()) grow();
      return std::nullopt;
    }
    if (e.recv == recv) {  // same side as the waiting ops: queue behind them
      const int32_t n = push_node(value);
      nodes_[static_cast<size_t>(e.tail)].next = n;
      e.tail = n;
      return std::nullopt;
    }
    const int32_t first = e.head;  // the other side's oldest waiting op is the partner
    std::optional<T> other = nodes_[static_cast<size_t>(first)].value;
    e.head = nodes_[static_cast<size_t>(first)].next;
    free_.push_back(first);
    if (e.head < 0) erase(i);
    return other;
  }

 private:
  struct Entry {
    Key key{};
    uint64_t hash = 0;
    int32_t head = -1, tail = -1;  // waiting ops, oldest first (nodes_)
    bool recv = false;             // which side waits
    bool used = false;
  };
  struct Node {
    T value;
    int32_t next;
  };
  size_t find(const Key& k, uint64_t h) const {
    const size_t mask = table_.size() - 1;
    size_t i = h & mask;
    while (table_[i].used && !(table_[i].hash == h && table_[i].key == k)) i = (i + 1) & mask;
    return i;
  }
  int32_t push_node(const T& value) {
    if (free_.empty()) {
      nodes_.push_back({value, -1});
      return static_cast<int32_t>(nodes_.size() - 1);
    }
    const int32_t n = free_.back();
    free_.pop_back();
    nodes_[static_cast<size_t>(n)] = {value, -1};
    return n;
  }
  // Backward-shift deletion: later entries of the probe run move up, so no tombstones.
  void erase(size_t i) {
    const size_t mask = table_.size() - 1;
    for (size_t j = i;;) {
      j = (j + 1) & mask;
      if (!table_[j].used) break;
      const size_t home = table_[j].hash & mask;
      const bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) table_[i] = table_[j], i = j;
    }
    table_[i].used = false;
    --live_;
  }
  void grow() {
    std::vector<Entry> old(table_.size() * 2);
    old.swap(table_);
    for (const Entry& e : old)
      if (e.used) table_[find(e.key, e.hash)] = e;
  }

  std::vector<Entry> table_ = std::vector<Entry>(64);  // size a power of two, at most half full
  size_t live_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;
};

}  // namespace rm::schedule
