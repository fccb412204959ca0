#include "sim/schedule/comm_matching.hpp"

#include <algorithm>
#include <tuple>

namespace rm::schedule {

// Sorting (key, id) records and pairing equal keys by position is the k-th
// with the k-th in id order; much faster than a map of vectors on 400K ops.
CommMatching match_comms(const Schedule& s) {
  CommMatching m;
  m.partner.assign(s.ops.size(), -1);
  m.call_of.assign(s.ops.size(), -1);

  using P2P = std::tuple<int, int, int64_t, OpId>;         // sender, receiver, tag, op
  using Member = std::tuple<int, int64_t, int32_t, OpId>;  // group, tag, member position, op
  std::vector<P2P> sends, recvs;
  std::vector<Member> coll;
  const auto n_ranks = static_cast<int>(s.ranks.size());
  const auto n_groups = static_cast<int>(s.groups.size());

  for (const Op& op : s.ops) {
    if (op.rank < 0 || op.rank >= n_ranks) continue;
    if (op.kind == OpKind::send) sends.emplace_back(op.rank, op.peer, op.tag, op.id);
    if (op.kind == OpKind::recv) recvs.emplace_back(op.peer, op.rank, op.tag, op.id);
    if (is_collective(op.kind) && op.group >= 0 && op.group < n_groups) {
      const auto& members = s.groups[static_cast<size_t>(op.group)].ranks;
      auto pos = std::find(members.begin(), members.end(), op.rank);
      if (pos == members.end()) continue;
      coll.emplace_back(op.group, op.tag, static_cast<int32_t>(pos - members.begin()), op.id);
    }
  }
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());
  auto p2p_key = [](const P2P& x) { return std::tie(std::get<0>(x), std::get<1>(x), std::get<2>(x)); };
  for (size_t i = 0, j = 0; i < sends.size() && j < recvs.size();) {
    if (p2p_key(sends[i]) < p2p_key(recvs[j])) ++i;
    else if (p2p_key(recvs[j]) < p2p_key(sends[i])) ++j;
    else {
      for (const auto key = p2p_key(sends[i]);
           i < sends.size() && j < recvs.size() && p2p_key(sends[i]) == key && p2p_key(recvs[j]) == key; ++i, ++j) {
        m.partner[static_cast<size_t>(std::get<3>(sends[i]))] = std::get<3>(recvs[j]);
        m.partner[static_cast<size_t>(std::get<3>(recvs[j]))] = std::get<3>(sends[i]);
      }
    }
  }
  std::sort(coll.begin(), coll.end());
  for (size_t b = 0; b < coll.size();) {  // one (group, tag) at a time: its calls in order
    const int g = std::get<0>(coll[b]);
    const int64_t tag = std::get<1>(coll[b]);
    size_t e = b;
    while (e < coll.size() && std::get<0>(coll[e]) == g && std::get<1>(coll[e]) == tag) ++e;
    const size_t members = s.groups[static_cast<size_t>(g)].ranks.size();
    std::vector<size_t> first(members + 1, e);  // per member position: its ops are coll[first[p], first[p + 1])
    for (size_t i = e; i-- > b;) first[static_cast<size_t>(std::get<2>(coll[i]))] = i;
    for (size_t p = members; p-- > 0;) first[p] = std::min(first[p], first[p + 1]);
    size_t calls = 0;
    for (size_t p = 0; p < members; ++p) calls = std::max(calls, first[p + 1] - first[p]);
    for (size_t k = 0; k < calls; ++k) {
      std::vector<OpId> call(members, -1);
      for (size_t p = 0; p < members; ++p) {
        if (first[p] + k >= first[p + 1]) continue;
        call[p] = std::get<3>(coll[first[p] + k]);
        m.call_of[static_cast<size_t>(call[p])] = static_cast<int64_t>(m.calls.size());
      }
      m.calls.push_back(std::move(call));
    }
    b = e;
  }
  return m;
}

}  // namespace rm::schedule
