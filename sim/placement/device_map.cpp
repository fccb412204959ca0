#include "sim/placement/device_map.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace rm::placement {

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
}  // namespace rm::placement
