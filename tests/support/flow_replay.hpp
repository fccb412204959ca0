// Runs flows through a FlowNetwork to completion the way the analytic engine
// does ((time, seq) events; an end is stale unless its version is the flow's):
// the oracle driver of the flow-network and reuse tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "sim/engine/flow_network.hpp"

namespace rm::test {

struct FlowStart {
  double at;
  std::vector<int> links;
  double bytes;
};

struct FlowReplay {
  std::vector<double> rates;  // every rate the network set, in order
  std::vector<double> ends;   // per flow of the input
  std::vector<char> binding;  // FlowNetwork::binding() after the run
};

inline FlowReplay replay_flows(std::vector<double> caps, const std::vector<FlowStart>& flows) {
  engine::FlowNetwork net(std::move(caps));
  struct Ev {
    double t;
    uint64_t seq;
    int kind;  // 0 start (id = index into flows), 1 done (id = flow id)
    int32_t id;
    uint32_t version;
    bool operator>(const Ev& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> q;
  uint64_t seq = 0;
  for (size_t i = 0; i < flows.size(); ++i) q.push({flows[i].at, seq++, 0, int32_t(i), 0});
  FlowReplay out;
  out.ends.assign(flows.size(), -1);
  std::vector<size_t> owner;  // flow id -> index into flows
  while (!q.empty()) {
    const Ev e = q.top();
    q.pop();
    if (e.kind == 1 && e.version != net.version(e.id)) continue;
    if (e.kind == 0) {
      const auto& f = flows[size_t(e.id)];
      const int32_t id = net.start(f.links, f.bytes, e.t);
      if (size_t(id) >= owner.size()) owner.resize(size_t(id) + 1);
      owner[size_t(id)] = size_t(e.id);
    } else {
      out.ends[owner[size_t(e.id)]] = e.t;
      net.finish(e.id, e.t);
    }
    for (int32_t g : net.rescheduled()) {
      out.rates.push_back(net.rate(g));
      q.push({net.end_time(g), seq++, 1, g, net.version(g)});
    }
  }
  out.binding = net.binding();
  return out;
}

}  // namespace rm::test
