#include "sim/placement/attention_kind.hpp"

#include <array>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

namespace rm::placement {

std::unique_ptr<AttentionKind> make_local_attention(const Experiment& e);
std::unique_ptr<AttentionKind> make_ring_attention(const Experiment& e);
std::unique_ptr<AttentionKind> make_double_ring_attention(const Experiment& e);
std::unique_ptr<AttentionKind> make_hierarchical_ring_attention(const Experiment& e);

namespace {

// The registry: a new kind is one file and one row here.
constexpr std::array kKinds{
    AttentionKindEntry{"local", make_local_attention},
    AttentionKindEntry{"ring", make_ring_attention},
    AttentionKindEntry{"double_ring", make_double_ring_attention},
    AttentionKindEntry{"hierarchical", make_hierarchical_ring_attention},
};

}  // namespace

std::span<const AttentionKindEntry> attention_kinds() { return kKinds; }

std::string_view attention_kind_name(const Experiment& e) {
  return e.parallel.cp == 1 ? "local" : to_string(e.parallel.ring);
}

std::unique_ptr<AttentionKind> make_attention_kind(const Experiment& e) {
  const std::string_view name = attention_kind_name(e);
  for (const auto& k : kKinds)
    if (k.name == name) return k.make(e);
  throw ConfigError(fmt::format("{}: $.parallel.ring: no attention kind \"{}\" is registered", e.source, name));
}

RingLayout layout_of_rings(std::vector<std::vector<int>> rings) {
  if (rings.empty() || rings[0].empty()) throw std::invalid_argument("ring layout: no rings");
  const int outer = int(rings.size()), inner = int(rings[0].size()), cp = outer * inner;
  std::vector<std::pair<int, int>> where(static_cast<size_t>(cp), {-1, -1});
  for (int o = 0; o < outer; ++o) {
    if (int(rings[size_t(o)].size()) != inner)
      throw std::invalid_argument(fmt::format("ring layout: ring {} holds {} ranks, ring 0 {}", o,
                                              rings[size_t(o)].size(), inner));
    for (int i = 0; i < inner; ++i) {
      const int c = rings[size_t(o)][size_t(i)];
      if (c < 0 || c >= cp || where[size_t(c)].first >= 0)
        throw std::invalid_argument(fmt::format("ring layout: context rank {} is out of range or repeated", c));
      where[size_t(c)] = {o, i};
    }
  }
  std::vector<std::vector<int>> src(static_cast<size_t>(cp), std::vector<int>(size_t(cp)));
  for (int c = 0; c < cp; ++c) {
    const auto [o, i] = where[size_t(c)];
    for (int so = 0; so < outer; ++so)
      for (int si = 0; si < inner; ++si)
        src[size_t(so * inner + si)][size_t(c)] =
            rings[size_t((o - so + outer) % outer)][size_t((i - si + inner) % inner)];
  }
  return {std::move(rings), std::move(src)};
}

}  // namespace rm::placement
