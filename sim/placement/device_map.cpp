#include "sim/placement/device_map.hpp"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace rm {

HeadShard head_shard(const Model& m, int hp, int h) {
  if (m.heads % hp != 0 || h < 0 || h >= hp)
    throw std::invalid_argument(fmt::format("head_shard: {} heads do not split over {} head ranks", m.heads, hp));
  HeadShard s;
  s.heads = m.heads / hp;
  s.first_head = h * s.heads;
  const int group = m.heads / m.kv_heads;  // query heads per KV head
  s.first_kv_head = s.first_head / group;
  const int last_kv = (s.first_head + s.heads - 1) / group;
  s.kv_heads = last_kv - s.first_kv_head + 1;
  s.kv_replicated = hp > m.kv_heads;
  return s;
}

DeviceMap::DeviceMap(const Parallel& p) : p_(p) {}

int DeviceMap::gpu(int d, int h, int c) const {
  const int base = d * p_.hp * p_.cp;
  return p_.placement == PlacementOrder::head_first ? base + c * p_.hp + h : base + h * p_.cp + c;
}

std::vector<int> DeviceMap::context_group(int d, int h) const {
  std::vector<int> g;
  for (int c = 0; c < p_.cp; ++c) g.push_back(gpu(d, h, c));
  return g;
}
std::vector<int> DeviceMap::head_group(int d, int c) const {
  std::vector<int> g;
  for (int h = 0; h < p_.hp; ++h) g.push_back(gpu(d, h, c));
  return g;
}
std::vector<int> DeviceMap::data_group(int h, int c) const {
  std::vector<int> g;
  for (int d = 0; d < p_.dp; ++d) g.push_back(gpu(d, h, c));
  return g;
}

std::vector<std::vector<int>> double_ring_windows(int cp, int w, bool interleaved) {
  if (w < 1 || cp % w != 0) throw std::invalid_argument(fmt::format("double ring: window {} does not divide cp {}", w, cp));
  std::vector<std::vector<int>> out;
  if (!interleaved) {
    for (int s = 0; s < cp; s += w) {
      out.emplace_back();
      for (int i = 0; i < w; ++i) out.back().push_back(s + i);
    }
    return out;
  }
  if (cp % (2 * w) != 0) throw std::invalid_argument("interleaved windows need cp divisible by 2*window");
  for (int block = 0; block < cp; block += 2 * w)
    for (int parity = 0; parity < 2; ++parity) {
      out.emplace_back();
      for (int i = 0; i < w; ++i) out.back().push_back(block + parity + 2 * i);
    }
  return out;
}

RingHierarchy node_local_rings(const std::vector<int>& group_gpus, const Topology& topo) {
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < int(group_gpus.size()); ++r) by_node[topo.node_of(group_gpus[size_t(r)])].push_back(r);
  RingHierarchy h;
  for (auto& [node, ranks] : by_node) h.inner.push_back(ranks);
  for (const auto& in : h.inner)
    if (in.size() != h.inner[0].size())
      throw std::invalid_argument("hierarchical ring: the context group holds different GPU counts on different nodes");
  return h;
}

std::vector<std::vector<int>> ring_sources(RingKind kind, int cp, int window, bool interleaved,
                                           const RingHierarchy* hier) {
  std::vector<std::vector<int>> src(static_cast<size_t>(cp), std::vector<int>(size_t(cp)));
  // Two-level rings: groups[o][i] is a context rank; an outer step moves KV one group
  // back, an inner step one position back inside the group.
  std::vector<std::vector<int>> groups;
  if (kind == RingKind::ring) {
    groups.push_back({});
    for (int r = 0; r < cp; ++r) groups[0].push_back(r);
  } else if (kind == RingKind::double_ring) {
    groups = double_ring_windows(cp, window, interleaved);
  } else {
    if (!hier) throw std::invalid_argument("hierarchical ring sources need the node-local rings");
    groups = hier->inner;
  }
  const int outer = int(groups.size()), inner = int(groups[0].size());
  std::vector<std::pair<int, int>> where(static_cast<size_t>(cp));
  for (int o = 0; o < outer; ++o)
    for (int i = 0; i < inner; ++i) where[size_t(groups[size_t(o)][size_t(i)])] = {o, i};
  for (int r = 0; r < cp; ++r) {
    auto [o, i] = where[size_t(r)];
    for (int so = 0; so < outer; ++so)
      for (int si = 0; si < inner; ++si) {
        int k = so * inner + si;
        src[size_t(k)][size_t(r)] = groups[size_t((o - so + outer) % outer)][size_t((i - si + inner) % inner)];
      }
  }
  return src;
}

}  // namespace rm
