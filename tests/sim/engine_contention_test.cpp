// Both engines under link contention, on schedules whose answer is computed by
// hand: flows share every link of their route max-min fairly (the analytic
// engine's FlowNetwork, SimGrid's LMM), latency first.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/engine/engine.hpp"
#include "sim/schedule/builder.hpp"
#include "tests/support/engine_printers.hpp"

namespace rm::engine {
namespace {

using schedule::OpKind;
using schedule::StreamKind;

// Effective rates (bandwidth x link efficiency) of the clusters below.
constexpr double kPcie = 25e9 * 0.80;     // GPU <-> NIC
constexpr double kNic = 200e9 / 8 * 0.85;  // HDR NIC <-> switch

// A shipped cluster with `--set` edits, and the cost model an experiment on it
// gets (only its links matter here).
struct Env {
  Experiment e;
  topology::Topology topo;
  cost::CostModel model;
  explicit Env(std::vector<std::string> sets)
      : e(load(std::move(sets))), topo(e.cluster), model(cost::CostModel::for_experiment(e)) {}
  static Experiment load(std::vector<std::string> sets) {
    sets.push_back("parallel.cp=8");  // fits every cluster below
    return load_experiment(ConfigStore(), "", sets);
  }
};

Env a100(std::vector<std::string> more = {}) {
  more.insert(more.begin(), "cluster=a100-40g-4x8-hdr");
  return Env(std::move(more));
}

// 4 nodes x 2 GPUs, a NIC per GPU, rail-optimised with one spine: every
// inter-node flow between different local ranks crosses the spine.
Env rails(int uplink_Gbps) {
  return Env({"cluster=a100-80g-8x8-hdr", "cluster.nodes=4", "cluster.gpus_per_node=2", "cluster.nics_per_node=2",
              "cluster.fabric.spines=1", "cluster.fabric.uplink_bandwidth_Gbps=" + std::to_string(uplink_Gbps)});
}

bool share_a_link(const topology::Topology& t, std::vector<std::pair<int, int>> pairs) {
  for (int l : t.route(pairs[0].first, pairs[0].second).links) {
    bool all = true;
    for (const auto& [a, b] : pairs) {
      const auto& r = t.route(a, b).links;
      all = all && std::find(r.begin(), r.end(), l) != r.end();
    }
    if (all) return true;
  }
  return false;
}

const traces::Event& event(const traces::Timeline& tl, int64_t op) {
  for (const auto& e : tl.events)
    if (e.op == op) return e;
  throw std::out_of_range("no event");
}

// Concurrent sends from rank 0 (one stream each) to ranks on the given GPUs.
struct Fan {
  schedule::Schedule s;
  std::vector<schedule::P2PIds> ids;
};
Fan fan(const std::vector<std::pair<int, int>>& gpu_pairs, const std::vector<int64_t>& bytes) {
  schedule::ScheduleBuilder b;
  std::vector<schedule::P2PIds> ids;
  for (size_t i = 0; i < gpu_pairs.size(); ++i) {
    const int src = b.add_rank(gpu_pairs[i].first), dst = b.add_rank(gpu_pairs[i].second);
    b.add_stream(src, StreamKind::comm_inter), b.add_stream(dst, StreamKind::comm_inter);
    ids.push_back(b.p2p({src, 0, dst, 0, bytes[i], {}, int64_t(i)}));
  }
  return {std::move(b).build(), ids};
}

class Contention : public ::testing::TestWithParam<EngineKind> {};

TEST_P(Contention, TwoFlowsThroughAnUplinkOfTwiceTheirRateAreNotSlowed) {
  const Env env = rails(400);  // uplink 42.5 GB/s; each flow is PCIe-bound at 20 GB/s
  const std::vector<std::pair<int, int>> pairs{{1, 2}, {3, 4}};
  ASSERT_TRUE(share_a_link(env.topo, pairs));
  const int64_t bytes = 400'000'000;
  const auto f = fan(pairs, {bytes, bytes});
  const auto tl = simulate(f.s, env.topo, env.model, GetParam());
  for (size_t i = 0; i < 2; ++i) {
    const double alone = env.model.transfer_seconds(env.topo, pairs[i].first, pairs[i].second, double(bytes));
    EXPECT_NEAR(event(tl, f.ids[i].recv).end_s, alone, alone * 1e-6);
  }
}

TEST_P(Contention, TwoFlowsFromOneGpuShareItsPcieLinkAndEndTogether) {
  const Env env = a100();
  const std::vector<std::pair<int, int>> pairs{{0, 8}, {0, 16}};
  const int64_t bytes = 200'000'000;
  const double lat = env.model.transfer_seconds(env.topo, 0, 8, 0);
  ASSERT_EQ(lat, env.model.transfer_seconds(env.topo, 0, 16, 0));
  const auto f = fan(pairs, {bytes, bytes});
  const auto tl = simulate(f.s, env.topo, env.model, GetParam());
  const double t = lat + 2 * double(bytes) / kPcie;  // 10 GB/s each: twice the lone time
  for (const auto& ids : f.ids) EXPECT_NEAR(event(tl, ids.recv).end_s, t, t * 1e-6);
}

TEST_P(Contention, ThreeFlowsOnOneNicShareItPiecewise) {
  // One NIC per node: GPUs 0, 1, 2 send B, 2B, 3B to node 1 through it.
  // R = NIC rate. R/3 each until the first ends (B at R/3: 3B/R); R/2 each
  // until the second's last B is done (+2B/R); the third's last B then goes
  // alone, PCIe-bound (+B/kPcie).
  const Env env = a100({"cluster.nics_per_node=1"});
  const std::vector<std::pair<int, int>> pairs{{0, 8}, {1, 9}, {2, 10}};
  ASSERT_TRUE(share_a_link(env.topo, pairs));
  const double b = 100e6, lat = env.model.transfer_seconds(env.topo, 0, 8, 0);
  const auto f = fan(pairs, {int64_t(b), int64_t(2 * b), int64_t(3 * b)});
  const auto tl = simulate(f.s, env.topo, env.model, GetParam());
  const double want[] = {lat + 3 * b / kNic, lat + 5 * b / kNic, lat + 5 * b / kNic + b / kPcie};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(event(tl, f.ids[i].recv).end_s, want[i], want[i] * 1e-6) << "flow " << i;
}

TEST_P(Contention, AFlowStartingWhenAnotherIsHalfDoneSharesTheRest) {
  // GPU 0 sends A to GPU 8 at t = 0 and, once a message from GPU 1 has arrived
  // (d seconds, over NVSwitch links A does not use), B to GPU 16; both carry
  // 2 x kPcie x d bytes over GPU 0's PCIe link. A flows alone from lat to
  // d + lat (half done), then both at kPcie / 2 until A ends at lat + 3d; B's
  // other half then goes alone and ends at lat + 4d.
  const Env env = a100();
  schedule::ScheduleBuilder sb;
  const int r0 = sb.add_rank(0), r1 = sb.add_rank(1), r8 = sb.add_rank(8), r16 = sb.add_rank(16);
  const int in = sb.add_stream(r0, StreamKind::comm_intra);
  const int comm_a = sb.add_stream(r0, StreamKind::comm_inter, "a"), comm_b = sb.add_stream(r0, StreamKind::comm_inter, "b");
  sb.add_stream(r1, StreamKind::comm_intra), sb.add_stream(r8, StreamKind::comm_inter), sb.add_stream(r16, StreamKind::comm_inter);
  const int64_t message = 24'000'000;
  const double d = env.model.transfer_seconds(env.topo, 1, 0, double(message));
  const auto bytes = static_cast<int64_t>(2 * kPcie * d);
  const auto go = sb.p2p({r1, 0, r0, in, message, {}, 2});
  const auto a = sb.p2p({r0, comm_a, r8, 0, bytes, {}, 0});
  const auto bb = sb.p2p({r0, comm_b, r16, 0, bytes, {}, 1});
  sb.add_dep(bb.send, go.recv);
  const auto tl = simulate(std::move(sb).build(), env.topo, env.model, GetParam());
  const double lat = env.model.transfer_seconds(env.topo, 0, 8, 0), half = double(bytes) / (2 * kPcie);
  ASSERT_NEAR(event(tl, go.recv).end_s, d, d * 1e-9);
  EXPECT_NEAR(event(tl, a.recv).end_s, lat + 3 * half, (lat + 3 * half) * 1e-6);
  EXPECT_NEAR(event(tl, bb.recv).end_s, lat + 4 * half, (lat + 4 * half) * 1e-6);
}

TEST_P(Contention, RingAllGatherAcrossAnOversubscribedSpine) {
  // 8 ranks on GPUs 0..7 of rails(200): the ring hops 1->2, 3->4, 5->6, 7->0
  // cross nodes from rail 1 to rail 0, all through the one spine's uplink
  // (21.25 GB/s, 4:1 oversubscribed for them): each gets kNic / 4. At every
  // step the four cross hops start together (each waits for its own previous
  // send; the intra-node hop it forwards is long done), so each of the 7 steps
  // takes lat + chunk / (kNic / 4), chunk = bytes / 8.
  const Env env = rails(200);
  ASSERT_TRUE(share_a_link(env.topo, {{1, 2}, {3, 4}, {5, 6}, {7, 0}}));
  schedule::ScheduleBuilder b;
  std::vector<int> ranks;
  for (int g = 0; g < 8; ++g) ranks.push_back(b.add_rank(g)), b.add_stream(g, StreamKind::comm_inter);
  const int64_t bytes = 800'000'000;
  const auto ids = b.collective(b.add_group(ranks), OpKind::all_gather, bytes, {}, StreamKind::comm_inter);
  const auto tl = simulate(std::move(b).build(), env.topo, env.model, GetParam());
  const double lat = env.model.transfer_seconds(env.topo, 1, 2, 0);
  const double t = 7 * (lat + double(bytes) / 8 / (kNic / 4));
  EXPECT_NEAR(tl.makespan_s(), t, t * 1e-6);
  for (auto id : ids) EXPECT_LE(event(tl, id).end_s, t * (1 + 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Both, Contention, ::testing::Values(EngineKind::analytic, EngineKind::simgrid),
                         [](const auto& p) { return std::string(to_string(p.param)); });

}  // namespace
}  // namespace rm::engine
