#include "sim/schedule/comm_matching.hpp"

#include <algorithm>
#include <tuple>
#include <cstdint>

namespace rm::schedule {

namespace {

// Dense ids for keys, in first-seen order: one probe of a flat open-addressing
// table per op (no node per key: a ring has one key per step and pair).
template <class Key>
struct KeyIds {
  std::vector<Key> keys;
  std::vector<int32_t> slots;  // key id, -1 empty; size a power of two, at most half full
  static uint64_t mix(uint64_t h) {  // splitmix64's finalizer: linear probing needs spread bits
    h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27, h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
  }
  static uint64_t hash(const Key& k) {
    uint64_t h = 0;
    std::apply([&](const auto&... x) { ((h = mix(h ^ static_cast<uint64_t>(x))), ...); }, k);
    return h;
  }
  void grow() {
    slots.assign(std::max<size_t>(64, slots.size() * 2), -1);
    const size_t mask = slots.size() - 1;
    for (size_t id = 0; id < keys.size(); ++id) {
      size_t h = hash(keys[id]) & mask;
      while (slots[h] >= 0) h = (h + 1) & mask;
      slots[h] = static_cast<int32_t>(id);
    }
  }
  int32_t operator()(const Key& k) {
    if ((keys.size() + 1) * 2 > slots.size()) grow();
    const size_t mask = slots.size() - 1;
    for (size_t h = hash(k) & mask;; h = (h + 1) & mask) {
      const int32_t id = slots[h];
      if (id < 0) {
        slots[h] = static_cast<int32_t>(keys.size());
        keys.push_back(k);
        return slots[h];
      }
      if (keys[static_cast<size_t>(id)] == k) return id;
    }
  }
};

// Pairs the k-th send with the k-th recv of each (sender, receiver, tag) key
// in one pass in id order: a key stays in the table only while one side has
// ops waiting (first in, first out), so the table holds the pairs in flight,
// not every pair ever made, and stays in cache however long the schedule.
class P2PMatcher {
 public:
  using Key = std::tuple<int, int, int64_t>;
  explicit P2PMatcher(std::vector<OpId>& partner) : partner_(partner), table_(64) {}

  void add(const Key& k, bool recv, OpId op) {
    const uint64_t h = KeyIds<Key>::hash(k);
    size_t i = find(k, h);
    Entry& e = table_[i];
    if (!e.used) {  // a new key: op waits
      e = {k, h, push_node(op), -1, recv, true};
      e.tail = e.head;
      if (++live_ * 2 > table_.size()) grow();
      return;
    }
    if (e.recv == recv) {  // same side as the waiting ops: queue behind them
      const int32_t n = push_node(op);
      nodes_[static_cast<size_t>(e.tail)].next = n;
      e.tail = n;
      return;
    }
    const int32_t first = e.head;  // the other side's oldest waiting op is op's partner
    const OpId other = nodes_[static_cast<size_t>(first)].op;
    partner_[static_cast<size_t>(op)] = other;
    partner_[static_cast<size_t>(other)] = op;
    e.head = nodes_[static_cast<size_t>(first)].next;
    free_.push_back(first);
    if (e.head < 0) erase(i);
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
    OpId op;
    int32_t next;
  };
  size_t find(const Key& k, uint64_t h) const {
    const size_t mask = table_.size() - 1;
    size_t i = h & mask;
    while (table_[i].used && !(table_[i].hash == h && table_[i].key == k)) i = (i + 1) & mask;
    return i;
  }
  int32_t push_node(OpId op) {
    int32_t n;
    if (!free_.empty()) n = free_.back(), free_.pop_back();
    else n = static_cast<int32_t>(nodes_.size()), nodes_.emplace_back();
    nodes_[static_cast<size_t>(n)] = {op, -1};
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

  std::vector<OpId>& partner_;
  std::vector<Entry> table_;  // size a power of two, at most half full
  size_t live_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;
};

// Ops grouped by bucket, each bucket in id order (a counting sort).
struct Buckets {
  std::vector<int64_t> begin;
  std::vector<OpId> ops;
  Buckets(size_t n, const std::vector<std::pair<int64_t, OpId>>& items) : begin(n + 1, 0), ops(items.size()) {
    for (const auto& [b, op] : items) ++begin[static_cast<size_t>(b) + 1];
    for (size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
    std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
    for (const auto& [b, op] : items) ops[static_cast<size_t>(fill[static_cast<size_t>(b)]++)] = op;
  }
  int64_t size(size_t b) const { return begin[b + 1] - begin[b]; }
  OpId at(size_t b, int64_t k) const { return ops[static_cast<size_t>(begin[b] + k)]; }
};

}  // namespace

CommMatching match_comms(const Schedule& s) {
  CommMatching m;
  m.partner.assign(s.ops.size(), -1);
  m.call_of.assign(s.ops.size(), -1);
  const auto n_ranks = static_cast<int>(s.ranks.size());
  const auto n_groups = static_cast<int>(s.groups.size());

  P2PMatcher p2p(m.partner);
  KeyIds<std::pair<int, int64_t>> coll;       // group, tag
  std::vector<std::pair<int64_t, OpId>> members;  // (key id, position)
  std::vector<int32_t> position;
  for (const Op& op : s.ops) {
    if (op.rank < 0 || op.rank >= n_ranks) continue;
    if (op.kind == OpKind::send) p2p.add({op.rank, op.peer, op.tag}, false, op.id);
    if (op.kind == OpKind::recv) p2p.add({op.peer, op.rank, op.tag}, true, op.id);
    if (is_collective(op.kind) && op.group >= 0 && op.group < n_groups) {
      const auto& g = s.groups[static_cast<size_t>(op.group)].ranks;
      auto pos = std::find(g.begin(), g.end(), op.rank);
      if (pos == g.end()) continue;
      members.emplace_back(coll({op.group, op.tag}), op.id);
      position.push_back(static_cast<int32_t>(pos - g.begin()));
    }
  }
  // The k-th op of each member on one (group, tag) forms its k-th call; calls
  // are numbered by (group, tag), then k.
  std::vector<int64_t> slot_base(coll.keys.size() + 1, 0);  // per key: its members' slots from here
  for (size_t key = 0; key < coll.keys.size(); ++key)
    slot_base[key + 1] = slot_base[key] + int64_t(s.groups[static_cast<size_t>(coll.keys[key].first)].ranks.size());
  for (size_t i = 0; i < members.size(); ++i)
    members[i].first = slot_base[static_cast<size_t>(members[i].first)] + position[i];
  const Buckets slots(static_cast<size_t>(slot_base.back()), members);
  std::vector<int32_t> order(coll.keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return coll.keys[size_t(a)] < coll.keys[size_t(b)]; });
  for (int32_t key : order) {
    const auto first = static_cast<size_t>(slot_base[static_cast<size_t>(key)]);
    const auto size = static_cast<size_t>(slot_base[static_cast<size_t>(key) + 1]) - first;
    int64_t calls = 0;
    for (size_t p = 0; p < size; ++p) calls = std::max(calls, slots.size(first + p));
    for (int64_t k = 0; k < calls; ++k) {
      std::vector<OpId> call(size, -1);
      for (size_t p = 0; p < size; ++p) {
        if (k >= slots.size(first + p)) continue;
        call[p] = slots.at(first + p, k);
        m.call_of[static_cast<size_t>(call[p])] = static_cast<int64_t>(m.calls.size());
      }
      m.calls.push_back(std::move(call));
    }
  }
  return m;
}

}  // namespace rm::schedule
