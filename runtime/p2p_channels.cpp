#include "runtime/p2p_channels.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "sim/schedule/schedule_error.hpp"

namespace rm::runtime {

using schedule::OpId;
using schedule::OpKind;

P2pChannels p2p_channels(const schedule::Schedule& s, const schedule::CommMatching& m) {
  P2pChannels out;
  out.of_op.assign(s.ops.size(), -1);
  std::map<std::pair<int, int>, int32_t> channel;
  for (const auto& op : s.ops) {
    if (op.kind != OpKind::send || m.partner[size_t(op.id)] < 0) continue;
    const auto& recv = s.ops[size_t(m.partner[size_t(op.id)])];
    channel.emplace(std::pair{op.stream, recv.stream}, 0);
  }
  for (auto& [key, c] : channel) c = int32_t(out.streams.size()), out.streams.push_back(key);

  // (rank, channel) -> the stream that uses it; (channel, sender, receiver) -> sends and recvs in id order.
  std::map<std::pair<int, int32_t>, int> user;
  std::map<std::tuple<int32_t, int, int>, std::pair<std::vector<OpId>, std::vector<OpId>>> fifo;
  for (const auto& op : s.ops) {
    if (!schedule::is_p2p(op.kind) || m.partner[size_t(op.id)] < 0) continue;
    const auto& other = s.ops[size_t(m.partner[size_t(op.id)])];
    const bool send = op.kind == OpKind::send;
    const int32_t c = channel.at(send ? std::pair{op.stream, other.stream} : std::pair{other.stream, op.stream});
    out.of_op[size_t(op.id)] = c;
    const auto [it, fresh] = user.emplace(std::pair{op.rank, c}, op.stream);
    if (!fresh && it->second != op.stream) {
      const auto* a = s.find_stream(op.rank, it->second);
      throw schedule::ScheduleError(
          schedule::describe(s, op.id) + ": its transfer would share an NCCL communicator with stream '" +
          (a ? a->name : std::to_string(it->second)) +
          "' of the same rank (a send and a recv on differently numbered streams): the cuda backend needs each rank "
          "to use a communicator from one stream");
    }
    auto& f = fifo[{c, send ? op.rank : other.rank, send ? other.rank : op.rank}];
    (send ? f.first : f.second).push_back(op.id);
  }
  for (const auto& [key, f] : fifo)
    for (size_t k = 0; k < f.first.size(); ++k)
      if (k >= f.second.size() || m.partner[size_t(f.first[k])] != f.second[k])
        throw schedule::ScheduleError(schedule::describe(s, f.first[k]) +
                                      ": NCCL would pair it with another recv than the Schedule does (sends between "
                                      "two ranks on one stream must be received in the order they are sent)");
  return out;
}

}  // namespace rm::runtime
