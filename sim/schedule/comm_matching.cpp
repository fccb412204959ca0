#include "sim/schedule/comm_matching.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "sim/schedule/p2p_matcher.hpp"

namespace rm::schedule {

namespace {

// Dense ids for keys, in first-seen order: one probe of a flat open-addressing
// table per op (no node per key: a ring has one key per step and pair).
template <class Key>
struct KeyIds {
  std::vector<Key> keys;
  std::vector<int32_t> slots;  // key id, -1 empty; size a power of two, at most half full
  static uint64_t hash(const Key& k) { return tuple_hash(k); }
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

  P2PMatcher<OpId> p2p;
  auto pair_up = [&](const P2PMatcher<OpId>::Key& k, bool recv, OpId op) {
    if (const auto other = p2p.add(k, recv, op)) {
      m.partner[static_cast<size_t>(op)] = *other;
      m.partner[static_cast<size_t>(*other)] = op;
    }
  };
  KeyIds<std::pair<int, int64_t>> coll;       // group, tag
  std::vector<std::pair<int64_t, OpId>> members;  // (key id, position)
  std::vector<int32_t> position;
  for (const Op& op : s.ops) {
    if (op.rank < 0 || op.rank >= n_ranks) continue;
    if (op.kind == OpKind::send) pair_up({op.rank, op.peer, op.tag}, false, op.id);
    if (op.kind == OpKind::recv) pair_up({op.peer, op.rank, op.tag}, true, op.id);
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
