#include "sim/engine/symmetry.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>


namespace rm::engine {

using schedule::OpKind;

ReplicaRoutes::ReplicaRoutes(const topology::Topology& t, const cost::CostModel& m, schedule::ReplicaSymmetry sym)
    : t_(t),
      m_(m),
      replicas_(sym.replicas),
      shift_(sym.ranks_per_replica),
      image_(t.links().size(), -1),
      preimage_(t.links().size(), -1) {}

// Once per GPU pair a run uses (thousands under a world collective): flat
// tables and reused scratch rather than maps and sets.
std::string ReplicaRoutes::fold(int src, int dst, FoldedRoute& out) {
  out = {};
  auto& r = routes_;
  r.resize(static_cast<size_t>(replicas_));
  for (int k = 0; k < replicas_; ++k) {
    const int a = translate(src, k), b = translate(dst, k);
    if (a >= t_.gpus() || b >= t_.gpus()) return fmt::format("GPU {} or {} is outside the cluster", a, b);
    r[static_cast<size_t>(k)] = t_.compute_route(a, b).links;
    if (r[static_cast<size_t>(k)].size() != r[0].size())
      return fmt::format("route {} -> {} has {} links, its translate {} -> {} {}", src, dst, r[0].size(), a, b,
                         r[static_cast<size_t>(k)].size());
  }
  const auto& links = t_.links();
  for (size_t i = 0; i < r[0].size(); ++i) {
    auto& orbit = orbit_;
    orbit.clear();
    for (int k = 0; k < replicas_; ++k) {
      const int x = r[static_cast<size_t>(k)][i], y = r[static_cast<size_t>((k + 1) % replicas_)][i];
      orbit.push_back(x);
      int& img = image_[static_cast<size_t>(x)];
      int& pre = preimage_[static_cast<size_t>(y)];
      if (img < 0) img = y;
      if (pre < 0) pre = x;
      const topology::Link &lx = links[static_cast<size_t>(x)], &ly = links[static_cast<size_t>(y)];
      if (img != y || pre != x || m_.link_rate_Bps(lx) != m_.link_rate_Bps(ly) || lx.latency_us != ly.latency_us)
        return fmt::format("link {} of route {} -> {} does not translate onto one link of the same rate ({} or {})",
                           lx.name, src, dst, links[static_cast<size_t>(img)].name, ly.name);
    }
    std::sort(orbit.begin(), orbit.end());
    const auto distinct = std::unique(orbit.begin(), orbit.end()) - orbit.begin();
    // Translates crossing the orbit's representative at this position: replicas / |orbit|.
    const int rep = orbit.front();
    const int32_t w = static_cast<int32_t>(replicas_ / static_cast<int>(distinct));
    out.path.push_back(rep), out.path_weights.push_back(w);
    auto at = std::find(out.links.begin(), out.links.end(), rep);
    if (at == out.links.end()) out.links.push_back(rep), out.weights.push_back(w);
    else out.weights[static_cast<size_t>(at - out.links.begin())] += w;
  }
  return "";
}

std::string symmetry_refusal(const schedule::Schedule& s, const topology::Topology& t, const cost::CostModel& m) {
  const schedule::ReplicaSymmetry& sym = s.symmetry;
  if (sym.replicas < 2) return "the Schedule holds every replica";
  if (sym.ranks_per_replica != static_cast<int>(s.ranks.size()))
    return fmt::format("{} ranks, but {} per replica", s.ranks.size(), sym.ranks_per_replica);
  for (const auto& rank : s.ranks)
    if (rank.gpu != rank.id) return fmt::format("rank {} is on GPU {}: the shortcut needs rank = GPU", rank.id, rank.gpu);
  ReplicaRoutes routes(t, m, sym);
  std::set<std::pair<int, int>> pairs;
  for (const auto& op : s.ops)
    if (op.kind == OpKind::send) pairs.insert({op.rank, op.peer});
  // Collectives: the pairs of each distinct (group, kind) plan; members are GPUs (rank = GPU).
  std::set<std::tuple<int, OpKind, int>> seen;
  for (const auto& op : s.ops) {
    if (!schedule::is_collective(op.kind) || !seen.insert({op.group, op.kind, op.peer}).second) continue;
    const schedule::Group& g = s.groups[static_cast<size_t>(op.group)];
    const int n = static_cast<int>(g.ranks.size());
    if (!g.spans_replicas) {
      const int root = op.kind == OpKind::broadcast
                           ? static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), op.peer) - g.ranks.begin())
                           : 0;
      for (const auto& [a, b] : cost::collective_pairs(op.kind, n, root))
        pairs.insert({g.ranks[size_t(a)], g.ranks[size_t(b)]});
      continue;
    }
    if (!std::is_sorted(g.ranks.begin(), g.ranks.end()))
      return fmt::format("group '{}' spans replicas but its members are not ascending", g.name);
    if (!cost::collective_row(op.kind).every_member_sends)
      return fmt::format("group '{}' spans replicas and runs a {} (a {}, which cannot be planned per replica)", g.name,
                         to_string(op.kind), cost::collective_row(op.kind).algorithm);
    for (const auto& [a, b] : cost::collective_pairs(op.kind, n, 0, sym.replicas))
      pairs.insert({g.ranks[size_t(a)], routes.translate(g.ranks[size_t(b % n)], b / n)});
  }
  FoldedRoute f;
  for (const auto& [a, b] : pairs)
    if (std::string why = routes.fold(a, b, f); !why.empty()) return why;
  return "";
}

}  // namespace rm::engine
