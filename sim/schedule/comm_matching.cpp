#include "sim/schedule/comm_matching.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace rm::schedule {

CommMatching match_comms(const Schedule& s) {
  CommMatching m;
  m.partner.assign(s.ops.size(), -1);
  m.call_of.assign(s.ops.size(), -1);

  using P2PKey = std::tuple<int, int, int64_t>;  // sender, receiver, tag
  std::map<P2PKey, std::vector<OpId>> sends, recvs;
  // (group, tag) -> per member position, that member's ops in id order
  std::map<std::pair<int, int64_t>, std::vector<std::vector<OpId>>> coll;
  const auto n_ranks = static_cast<int>(s.ranks.size());
  const auto n_groups = static_cast<int>(s.groups.size());

  for (const Op& op : s.ops) {
    if (op.rank < 0 || op.rank >= n_ranks) continue;
    if (op.kind == OpKind::send) sends[{op.rank, op.peer, op.tag}].push_back(op.id);
    if (op.kind == OpKind::recv) recvs[{op.peer, op.rank, op.tag}].push_back(op.id);
    if (is_collective(op.kind) && op.group >= 0 && op.group < n_groups) {
      const auto& members = s.groups[static_cast<size_t>(op.group)].ranks;
      auto pos = std::find(members.begin(), members.end(), op.rank);
      if (pos == members.end()) continue;
      auto& per_member = coll[{op.group, op.tag}];
      per_member.resize(members.size());
      per_member[static_cast<size_t>(pos - members.begin())].push_back(op.id);
    }
  }
  for (const auto& [key, ss] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end()) continue;
    for (size_t k = 0; k < std::min(ss.size(), it->second.size()); ++k) {
      m.partner[static_cast<size_t>(ss[k])] = it->second[k];
      m.partner[static_cast<size_t>(it->second[k])] = ss[k];
    }
  }
  for (const auto& [key, per_member] : coll) {
    size_t calls = 0;
    for (const auto& ops : per_member) calls = std::max(calls, ops.size());
    for (size_t k = 0; k < calls; ++k) {
      std::vector<OpId> call(per_member.size(), -1);
      for (size_t p = 0; p < per_member.size(); ++p) {
        if (k >= per_member[p].size()) continue;
        call[p] = per_member[p][k];
        m.call_of[static_cast<size_t>(call[p])] = static_cast<int64_t>(m.calls.size());
      }
      m.calls.push_back(std::move(call));
    }
  }
  return m;
}

}  // namespace rm::schedule
