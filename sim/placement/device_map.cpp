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

HeadShard head_shard(const Model& m, const Parallel& p, int h, int t) {
  if (t < 0 || t >= p.tp) throw std::invalid_argument(fmt::format("head_shard: tensor rank {} of {}", t, p.tp));
  return head_shard(m, p.hp * p.tp, t * p.hp + h);
}

DeviceMap::DeviceMap(const Parallel& p) : p_(p) {}

int DeviceMap::gpu(int d, int h, int c, int t) const {
  const int base = d * p_.hp * p_.cp + (p_.placement == PlacementOrder::head_first ? c * p_.hp + h : h * p_.cp + c);
  return base * p_.tp + t;
}

std::vector<int> DeviceMap::context_group(int d, int h, int t) const {
  std::vector<int> g;
  for (int c = 0; c < p_.cp; ++c) g.push_back(gpu(d, h, c, t));
  return g;
}
std::vector<int> DeviceMap::head_group(int d, int c, int t) const {
  std::vector<int> g;
  for (int h = 0; h < p_.hp; ++h) g.push_back(gpu(d, h, c, t));
  return g;
}
std::vector<int> DeviceMap::tensor_group(int d, int h, int c) const {
  std::vector<int> g;
  for (int t = 0; t < p_.tp; ++t) g.push_back(gpu(d, h, c, t));
  return g;
}
}  // namespace rm::placement
