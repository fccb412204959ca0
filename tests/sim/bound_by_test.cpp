// What bounds a step (sim/report/bound_by.hpp): link utilisation against
// hand-computed figures on Timelines whose times are given, the same on the
// engines' Timelines of one lone flow, invariants over random schedules, and
// the verdict on schedules built to be compute- or link-bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include <fmt/format.h>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/engine/engine.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/schedule/builder.hpp"
#include "tests/support/synthetic_schedules.hpp"

namespace rm::report {
namespace {

using schedule::OpKind;
using schedule::Phase;
using schedule::StreamKind;

// MTraining's testbed (4 x 8 A100, a 25 GB/s PCIe link from each GPU to its
// 200 Gb/s NIC): effective rates are bandwidth x link efficiency.
constexpr double kPcie = 25e9 * 0.80;
constexpr double kNic = 200e9 / 8 * 0.85;

struct Env {
  Experiment e;
  topology::Topology topo;
  cost::CostModel model;
  explicit Env(std::vector<std::string> sets = {})
      : e(load(std::move(sets))), topo(e.cluster), model(cost::CostModel::for_experiment(e)) {}
  static Experiment load(std::vector<std::string> sets) {
    sets.insert(sets.begin(), {"cluster=a100-40g-4x8-hdr", "parallel.cp=8"});
    return load_experiment(ConfigStore(), "", sets);
  }
};

// p2p sends, rank 2i on GPU src -> rank 2i+1 on GPU dst, each pair on its own ranks.
struct Flows {
  schedule::Schedule s;
  std::vector<schedule::P2PIds> ids;
};
Flows p2p(const std::vector<std::pair<int, int>>& gpus, int64_t bytes, const std::vector<Phase>& phases = {}) {
  schedule::ScheduleBuilder b;
  std::vector<schedule::P2PIds> ids;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int src = b.add_rank(gpus[i].first), dst = b.add_rank(gpus[i].second);
    b.add_stream(src, StreamKind::comm_inter), b.add_stream(dst, StreamKind::comm_inter);
    const Phase ph = i < phases.size() ? phases[i] : Phase::forward;
    ids.push_back(b.p2p({src, 0, dst, 0, bytes, {ph, -1, -1}, int64_t(i)}));
  }
  return {std::move(b).build(), ids};
}

// A Timeline with the given op times (seconds) and the run plan's edges.
traces::Timeline timed(const schedule::Schedule& s, const std::vector<std::pair<double, double>>& times) {
  engine::OpTimes t;
  for (const auto& [a, b] : times) t.start.push_back(a), t.end.push_back(b);
  return engine::to_timeline(s, t, traces::Source::runtime_cuda);
}

BoundBy run(const Env& env, const schedule::Schedule& s, const traces::Timeline& tl) {
  return bound_by(s, tl, env.topo, env.model, critical_path(s, tl), 1.0);
}

const LinkLoad* find(const BoundBy& b, int link) {
  for (const LinkLoad& l : b.links)
    if (l.link == link) return &l;
  return nullptr;
}

TEST(BoundBy, OneFlowLoadsEveryLinkOfItsRouteByBytesOverRateAndTime) {
  const Env env;
  const int64_t bytes = 300'000'000;
  const Flows f = p2p({{0, 8}}, bytes);
  // The send is posted at 1, the recv at 1.5: the transfer runs in [1.5, 3]; the step is [1, 3].
  const traces::Timeline tl = timed(f.s, {{1.0, 3.0}, {1.5, 3.0}});
  const BoundBy b = run(env, f.s, tl);
  const topology::Route& r = env.topo.route(0, 8);
  ASSERT_EQ(b.links.size(), r.links.size());
  for (int id : r.links) {
    const LinkLoad* l = find(b, id);
    ASSERT_NE(l, nullptr) << env.topo.links()[size_t(id)].name;
    const double rate = env.model.link_rate_Bps(env.topo.links()[size_t(id)]);
    EXPECT_DOUBLE_EQ(l->bytes, double(bytes));
    EXPECT_DOUBLE_EQ(l->busy_s, 1.5);
    EXPECT_DOUBLE_EQ(l->busy_utilisation, double(bytes) / (rate * 1.5));
    EXPECT_DOUBLE_EQ(l->utilisation, double(bytes) / (rate * 2.0));
    ASSERT_EQ(l->phases.size(), 1u);
    EXPECT_EQ(l->phases[0].phase, Phase::forward);
    EXPECT_DOUBLE_EQ(l->phases[0].utilisation, double(bytes) / (rate * 1.5));
  }
  // PCIe (20 GB/s effective) caps the inter-node route, not the NIC (21.25 GB/s).
  ASSERT_EQ(b.traffic.size(), 1u);
  EXPECT_TRUE(b.traffic[0].inter_node);
  EXPECT_EQ(b.traffic[0].capped_by, "pcie");
  EXPECT_DOUBLE_EQ(b.traffic[0].capped_share, 1.0);
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("capped by PCIe"), std::string::npos) << b.notes[0];
  EXPECT_NE(b.notes[0].find("the NIC is not the bottleneck"), std::string::npos) << b.notes[0];
  EXPECT_NE(b.notes[0].find(fmt::format("at {:.0f}% while busy", 100 * double(bytes) / (kPcie * 1.5))),
            std::string::npos)
      << b.notes[0];
}

TEST(BoundBy, TwoFlowsOnOneLinkAddTheirBytesOverTheUnionOfTheirIntervals) {
  // GPU 0 sends to GPUs 8 and 16: both cross GPU 0's PCIe link (and its NIC port).
  const Env env;
  const int64_t bytes = 100'000'000;
  const Flows f = p2p({{0, 8}, {0, 16}}, bytes, {Phase::forward, Phase::backward});
  const traces::Timeline tl = timed(f.s, {{0.0, 2.0}, {0.0, 2.0}, {1.0, 3.0}, {1.0, 3.0}});
  const BoundBy b = run(env, f.s, tl);
  const auto& r8 = env.topo.route(0, 8).links;
  const auto& r16 = env.topo.route(0, 16).links;
  int shared = 0;
  for (int id : r8) {
    const LinkLoad* l = find(b, id);
    ASSERT_NE(l, nullptr);
    const double rate = env.model.link_rate_Bps(env.topo.links()[size_t(id)]);
    if (std::find(r16.begin(), r16.end(), id) == r16.end()) {
      EXPECT_DOUBLE_EQ(l->busy_utilisation, double(bytes) / (rate * 2.0));
      continue;
    }
    ++shared;
    EXPECT_DOUBLE_EQ(l->bytes, 2.0 * double(bytes));
    EXPECT_DOUBLE_EQ(l->busy_s, 3.0);
    EXPECT_DOUBLE_EQ(l->busy_utilisation, 2.0 * double(bytes) / (rate * 3.0));
    EXPECT_DOUBLE_EQ(l->utilisation, 2.0 * double(bytes) / (rate * 3.0));
    ASSERT_EQ(l->phases.size(), 2u);
    for (const LinkPhaseLoad& p : l->phases) {
      EXPECT_DOUBLE_EQ(p.busy_s, 2.0);
      EXPECT_DOUBLE_EQ(p.utilisation, double(bytes) / (rate * 2.0));
    }
  }
  EXPECT_GE(shared, 2);  // the PCIe link and the NIC's port
  // The shared links carry twice the bytes: they lead the list.
  EXPECT_EQ(b.links.front().bytes, 2.0 * double(bytes));
}

TEST(BoundBy, ALoneFlowOnTheEnginesRunsItsBottleneckFullButForLatency) {
  const Env env;
  const int64_t bytes = 400'000'000;
  const Flows f = p2p({{0, 8}}, bytes);
  for (auto kind : {engine::EngineKind::analytic, engine::EngineKind::simgrid}) {
    const traces::Timeline tl = engine::simulate(f.s, env.topo, env.model, kind);
    const BoundBy b = run(env, f.s, tl);
    const double t = env.model.transfer_seconds(env.topo, 0, 8, double(bytes));
    const LinkLoad& top = b.links.front();
    EXPECT_EQ(top.kind, "pcie");
    EXPECT_NEAR(top.busy_utilisation, double(bytes) / (kPcie * t), 1e-9);
    EXPECT_GT(top.busy_utilisation, 0.99);
    // Nothing computes: communication holds the path, on the PCIe link.
    EXPECT_EQ(b.kind, BoundKind::link) << b.verdict;
    EXPECT_NE(b.verdict.find("PCIe"), std::string::npos) << b.verdict;
    for (const LinkLoad& l : b.links)
      if (l.kind == "nic") {
        EXPECT_NEAR(l.busy_utilisation, double(bytes) / (kNic * t), 1e-9);
      }
  }
}

TEST(BoundBy, UtilisationWhileBusyNeverPassesOneOnTheEngines) {
  // Over a link, the bytes of the transfers add up to at most rate x the
  // time some transfer runs, whatever the sharing: each transfer's interval
  // holds the time it actually moved bytes.
  const Env env;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const schedule::Schedule s = engine::random_schedule({seed, 10, 300});
    for (auto kind : {engine::EngineKind::analytic, engine::EngineKind::simgrid}) {
      if (kind == engine::EngineKind::simgrid && seed > 3) continue;  // a forked SimGrid per run: keep it short
      const traces::Timeline tl = engine::simulate(s, env.topo, env.model, kind);
      const BoundBy b = run(env, s, tl);
      EXPECT_FALSE(b.links.empty()) << "seed " << seed;
      for (const LinkLoad& l : b.links) {
        EXPECT_LE(l.busy_utilisation, 1 + 1e-9) << "seed " << seed << " " << l.name;
        EXPECT_LE(l.utilisation, l.busy_utilisation + 1e-12);
        EXPECT_LE(l.busy_s, tl.makespan_s() * (1 + 1e-12));
        double bytes = 0;
        for (const LinkPhaseLoad& p : l.phases) {
          EXPECT_LE(p.utilisation, 1 + 1e-9) << "seed " << seed << " " << l.name;
          bytes += p.bytes;
        }
        EXPECT_NEAR(bytes, l.bytes, l.bytes * 1e-12);
      }
      // Busiest first, deterministic.
      for (size_t i = 1; i < b.links.size(); ++i) EXPECT_GE(b.links[i - 1].utilisation, b.links[i].utilisation);
      EXPECT_EQ(to_json(b), to_json(run(env, s, tl)));
    }
  }
}

TEST(BoundBy, ARingOfBigMessagesIsLinkBoundAndOfBigComputeIsComputeBound) {
  const Env env;
  // 8 ranks on GPUs 4..11: hops 7 -> 8 and 11 -> 4 cross nodes, the others stay on NVSwitch.
  engine::RingSpec comm{8, 4, 6, 1e9, int64_t(2e9), 0};
  engine::RingSpec comp{8, 4, 6, 1e15, int64_t(1e6), 0};
  for (const auto& [spec, want] : {std::pair{comm, BoundKind::link}, std::pair{comp, BoundKind::compute}}) {
    const schedule::Schedule s = engine::ring_schedule(spec);
    const traces::Timeline tl = engine::simulate(s, env.topo, env.model, engine::EngineKind::analytic);
    const BoundBy b = run(env, s, tl);
    EXPECT_EQ(b.kind, want) << b.verdict;
    EXPECT_EQ(b.bottleneck >= 0, want == BoundKind::link);
    if (want == BoundKind::link) {
      const LinkLoad& l = b.links[size_t(b.bottleneck)];
      EXPECT_EQ(brief(b), fmt::format("link {} {} {:.0f}%", l.kind, l.name, 100 * l.busy_utilisation));
    } else {
      EXPECT_EQ(brief(b), "compute");
    }
    ASSERT_FALSE(b.phases.empty());
    EXPECT_EQ(b.phases[0].phase, Phase::forward);
    EXPECT_GT(b.phases[0].compute_mean_s, 0);
    if (want == BoundKind::compute) {
      EXPECT_NE(b.verdict.find("compute-bound"), std::string::npos);
      EXPECT_LT(b.phases[0].exposed_comm_max_s, 0.01 * b.phases[0].compute_mean_s);
    } else {
      EXPECT_GT(b.phases[0].exposed_comm_mean_s, b.phases[0].compute_mean_s);
      EXPECT_GE(b.links[size_t(b.bottleneck)].busy_utilisation, kLinkBoundUtilisation);
    }
  }
}

TEST(BoundBy, ARingOfTinyMessagesIsLatencyBound) {
  // 8-byte exchanges between ranks that compute nothing: the path is launches
  // and link latencies, and no link runs anywhere near full.
  const Env env;
  const schedule::Schedule s = engine::ring_schedule({8, 4, 6, 0, 8, 0});
  const traces::Timeline tl = engine::simulate(s, env.topo, env.model, engine::EngineKind::analytic);
  const BoundBy b = run(env, s, tl);
  EXPECT_EQ(b.kind, BoundKind::latency) << b.verdict;
  ASSERT_GE(b.bottleneck, 0);
  EXPECT_LT(b.links[size_t(b.bottleneck)].busy_utilisation, 0.01);
  EXPECT_NE(b.verdict.find("latency-bound"), std::string::npos);
}

TEST(BoundBy, AnImbalancedComputePathIsBoundByImbalance) {
  const Env env;
  const schedule::Schedule s = engine::ring_schedule({8, 0, 6, 1e14, int64_t(1e6), 0});
  const traces::Timeline tl = engine::simulate(s, env.topo, env.model, engine::EngineKind::analytic);
  const CriticalPath cp = critical_path(s, tl);
  // attn_fwd holds the path; a step-level imbalance of 2 makes half of it the imbalance's.
  const BoundBy b = bound_by(s, tl, env.topo, env.model, cp, 2.0);
  EXPECT_EQ(b.kind, BoundKind::imbalance) << b.verdict;
  EXPECT_DOUBLE_EQ(b.imbalance_lost_s, b.attention_critical_s / 2);
  EXPECT_EQ(brief(b), fmt::format("imbalance {:.0f}%", 100 * b.imbalance_lost_s / cp.length_s));
  EXPECT_EQ(bound_by(s, tl, env.topo, env.model, cp, 1.0).kind, BoundKind::compute);
}

TEST(BoundBy, LinkKindsNameTheirRole) {
  const Env env;
  std::set<std::string> kinds;
  for (const auto& l : env.topo.links()) kinds.insert(link_kind(env.topo, l));
  EXPECT_TRUE(kinds.count("nvlink"));
  EXPECT_TRUE(kinds.count("pcie"));
  EXPECT_TRUE(kinds.count("nic"));
}

}  // namespace
}  // namespace rm::report
