// FlowNetwork: max-min fair rates and completion times computed by hand, and
// the incremental solver (components only, rates kept when unchanged) against
// a from-scratch progressive filling and the definition of max-min fairness
// on random flow sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sim/engine/flow_network.hpp"
#include "tests/support/flow_replay.hpp"

namespace rm::engine {
namespace {

// A random route over `links` links: each link with chance 1 in `one_in`, else one drawn at random.
std::vector<int> random_route(std::mt19937_64& rng, int links, uint64_t one_in) {
  std::vector<int> r;
  for (int l = 0; l < links; ++l)
    if (rng() % one_in == 0) r.push_back(l);
  if (r.empty()) r.push_back(int(rng() % uint64_t(links)));
  return r;
}

// The engine's way of running flows to their ends (tests/support/flow_replay.hpp).
struct Run {
  using Start = test::FlowStart;
  static std::vector<double> end_times(std::vector<double> caps, const std::vector<Start>& flows) {
    return test::replay_flows(std::move(caps), flows).ends;
  }
};

TEST(FlowNetwork, TwoFlowsThroughALinkOfTwiceTheirRateAreNotSlowed) {
  // Links 0 and 1 (10 B/s) feed link 2 (20 B/s): each flow keeps 10 B/s.
  const auto end = Run::end_times({10, 10, 20}, {{0, {0, 2}, 100}, {0, {1, 2}, 100}});
  EXPECT_DOUBLE_EQ(end[0], 10.0);
  EXPECT_DOUBLE_EQ(end[1], 10.0);
}

TEST(FlowNetwork, TwoFlowsOnOneLinkTakeTwiceAsLongAndEndTogether) {
  const auto end = Run::end_times({10}, {{0, {0}, 100}, {0, {0}, 100}});
  EXPECT_DOUBLE_EQ(end[0], 20.0);
  EXPECT_DOUBLE_EQ(end[1], 20.0);
}

TEST(FlowNetwork, ThreeFlowsOnOneNicShareItPiecewise) {
  // NIC (link 0, 30 B/s) under three flows of 100, 200, 300 B, each with a
  // private 100 B/s link: 10 B/s each until the first ends at t = 10; 15 B/s
  // each until the second's last 100 B are done at 10 + 100/15; then 30 B/s for
  // the third's last 100 B (600 B in all over 30 B/s: t = 20).
  const auto end = Run::end_times({30, 100, 100, 100}, {{0, {1, 0}, 100}, {0, {2, 0}, 200}, {0, {3, 0}, 300}});
  EXPECT_NEAR(end[0], 10.0, 1e-12);
  EXPECT_NEAR(end[1], 10.0 + 100.0 / 15, 1e-12);
  EXPECT_NEAR(end[2], 20.0, 1e-12);
}

TEST(FlowNetwork, AFlowStartingWhenAnotherIsHalfDoneSharesTheRest) {
  // 10 B/s: A (100 B) alone until t = 5 (50 B left), then 5 B/s each: A ends at
  // 15; B has 50 B left then and ends alone at 20.
  const auto end = Run::end_times({10}, {{0, {0}, 100}, {5, {0}, 100}});
  EXPECT_NEAR(end[0], 15.0, 1e-12);
  EXPECT_NEAR(end[1], 20.0, 1e-12);
}

TEST(FlowNetwork, EachFlowGetsTheShareOfItsOwnBottleneck) {
  // A and B share link 0 (10); B and C share link 1 (100): A = B = 5, C = 95.
  FlowNetwork net({10, 100});
  const int32_t a = net.start(std::vector<int>{0}, 1, 0);
  const int32_t b = net.start(std::vector<int>{0, 1}, 1, 0);
  const int32_t c = net.start(std::vector<int>{1}, 1, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 5);
  EXPECT_DOUBLE_EQ(net.rate(b), 5);
  EXPECT_DOUBLE_EQ(net.rate(c), 95);
  // C's arrival changed only C; B's departure changes A and C.
  net.finish(b, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 10);
  EXPECT_DOUBLE_EQ(net.rate(c), 100);
  EXPECT_EQ(net.rescheduled().size(), 2u);
}

TEST(FlowNetwork, AFlowAloneOnItsLinksCostsNoSolverWork) {
  FlowNetwork net({10, 20, 30, 40});
  const int32_t a = net.start(std::vector<int>{0, 1}, 1, 0);
  const int32_t b = net.start(std::vector<int>{2, 3}, 1, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 10);
  EXPECT_DOUBLE_EQ(net.rate(b), 30);
  net.finish(a, 0);
  net.finish(b, 0);
  EXPECT_EQ(net.solves(), 0);
}

// From scratch: progressive filling over every active flow, raising all open
// flows by the same small steps of the smallest remaining link share.
std::vector<double> reference_rates(const std::vector<double>& caps, const std::vector<std::vector<int>>& routes) {
  std::vector<double> rate(routes.size(), 0);
  std::vector<char> frozen(routes.size(), 0);
  std::vector<double> left = caps;
  for (size_t done = 0; done < routes.size();) {
    double inc = 1e300;
    for (size_t l = 0; l < caps.size(); ++l) {
      int n = 0;
      for (size_t f = 0; f < routes.size(); ++f)
        if (!frozen[f] && std::count(routes[f].begin(), routes[f].end(), int(l))) ++n;
      if (n) inc = std::min(inc, left[l] / n);
    }
    for (size_t f = 0; f < routes.size(); ++f)
      if (!frozen[f]) {
        rate[f] += inc;
        for (int l : routes[f]) left[size_t(l)] -= inc;
      }
    for (size_t f = 0; f < routes.size(); ++f)
      if (!frozen[f])
        for (int l : routes[f])
          if (left[size_t(l)] <= 1e-9 * caps[size_t(l)]) {
            frozen[f] = 1, ++done;
            break;
          }
  }
  return rate;
}

TEST(FlowNetwork, IncrementalRatesMatchAFromScratchSolveAndAreMaxMinFair) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int links = 2 + int(rng() % 10);
    std::vector<double> caps;
    for (int l = 0; l < links; ++l) caps.push_back(double(1 + rng() % 50));
    FlowNetwork net(caps);
    std::vector<int32_t> active;
    std::map<int32_t, std::vector<int>> route;
    std::map<int32_t, std::pair<double, uint32_t>> before;  // rate, version before the last change
    for (int step = 0; step < 40; ++step) {
      for (int32_t f : active) before[f] = {net.rate(f), net.version(f)};
      if (!active.empty() && rng() % 3 == 0) {
        const size_t i = rng() % active.size();
        net.finish(active[i], 0);
        route.erase(active[i]);
        before.erase(active[i]);
        active.erase(active.begin() + long(i));
      } else {
        const std::vector<int> r = random_route(rng, links, 3);
        const int32_t f = net.start(r, 1, 0);
        active.push_back(f);
        route[f] = r;
      }
      std::vector<std::vector<int>> routes;
      for (int32_t f : active) routes.push_back(route[f]);
      const auto ref = reference_rates(caps, routes);
      const auto& changed = net.rescheduled();
      for (size_t i = 0; i < active.size(); ++i) {
        const int32_t f = active[i];
        ASSERT_NEAR(net.rate(f), ref[i], 1e-9 * ref[i]) << "trial " << trial << " step " << step;
        // Only the flows listed as rescheduled changed rate and version.
        const bool listed = std::count(changed.begin(), changed.end(), f) > 0;
        if (before.count(f)) {
          EXPECT_EQ(listed, net.rate(f) != before[f].first);
          EXPECT_EQ(listed, net.version(f) != before[f].second);
        } else {
          EXPECT_TRUE(listed);
        }
      }
      // Max-min fair: no link over capacity, and every flow crosses a full
      // link on which no flow gets more than it.
      std::vector<double> load(caps.size(), 0);
      for (int32_t f : active)
        for (int l : route[f]) load[size_t(l)] += net.rate(f);
      for (size_t l = 0; l < caps.size(); ++l) EXPECT_LE(load[l], caps[l] * (1 + 1e-12));
      for (int32_t f : active) {
        bool bottleneck = false;
        for (int l : route[f]) {
          if (load[size_t(l)] < caps[size_t(l)] * (1 - 1e-9)) continue;
          double top = 0;
          for (int32_t g : active)
            if (std::count(route[g].begin(), route[g].end(), l)) top = std::max(top, net.rate(g));
          bottleneck = bottleneck || net.rate(f) >= top * (1 - 1e-9);
        }
        EXPECT_TRUE(bottleneck) << "flow " << f << " has no bottleneck link";
      }
    }
  }
}

// Completion times of random flow sets (random start times and sizes) against
// a from-scratch fluid simulation: all rates recomputed at every event.
TEST(FlowNetwork, CompletionTimesMatchAFromScratchFluidSimulation) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int links = 2 + int(rng() % 6);
    std::vector<double> caps;
    for (int l = 0; l < links; ++l) caps.push_back(double(5 + rng() % 20));
    std::vector<Run::Start> flows;
    for (int i = 0; i < 12; ++i) {
      std::vector<int> r;
      for (int l = 0; l < links; ++l)
        if (rng() % 2) r.push_back(l);
      if (r.empty()) r.push_back(0);
      flows.push_back({double(rng() % 20), r, double(10 + rng() % 200)});
    }
    const auto got = Run::end_times(caps, flows);
    // Reference: advance to the next start or earliest completion.
    std::vector<double> left(flows.size()), want(flows.size(), -1);
    for (size_t i = 0; i < flows.size(); ++i) left[i] = flows[i].bytes;
    double t = 0;
    for (;;) {
      std::vector<size_t> act;
      for (size_t i = 0; i < flows.size(); ++i)
        if (flows[i].at <= t && want[i] < 0) act.push_back(i);
      double next_start = 1e300;
      for (const auto& f : flows)
        if (f.at > t) next_start = std::min(next_start, f.at);
      if (act.empty()) {
        if (next_start == 1e300) break;
        t = next_start;
        continue;
      }
      std::vector<std::vector<int>> routes;
      for (size_t i : act) routes.push_back(flows[i].links);
      const auto rate = reference_rates(caps, routes);
      double dt = next_start - t;
      for (size_t k = 0; k < act.size(); ++k) dt = std::min(dt, left[act[k]] / rate[k]);
      for (size_t k = 0; k < act.size(); ++k) {
        left[act[k]] -= rate[k] * dt;
        if (left[act[k]] <= 1e-9 * flows[act[k]].bytes) want[act[k]] = t + dt;
      }
      t += dt;
    }
    for (size_t i = 0; i < flows.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-8 * want[i]) << "trial " << trial << " flow " << i;
  }
}

// The solver as it ran before it dropped emptied links from its scans: the
// component found breadth-first from the changed flow's links, and every one
// of its links scanned in that order each round, the first least share
// winning. Rates only; flow ids, link lists and the lone-flow shortcut as in
// FlowNetwork. The tie order decides the last bits of the rates, so the real
// solver must equal it bit for bit.
class ScanAllLinks {
 public:
  explicit ScanAllLinks(std::vector<double> caps) : cap_(std::move(caps)), on_(cap_.size()) {}
  int32_t start(const std::vector<int>& links, const std::vector<int32_t>& w) {
    int32_t id;
    if (!free_.empty()) id = free_.back(), free_.pop_back();
    else id = int32_t(f_.size()), f_.emplace_back();
    F& f = f_[size_t(id)];
    bool weighted = false;
    for (int32_t x : w) weighted = weighted || x != 1;
    f = {links, weighted ? w : std::vector<int32_t>{}, 0, true};
    bool alone = true;
    for (int l : links) alone = alone && on_[size_t(l)].empty();
    for (int l : links) on_[size_t(l)].push_back(id);
    if (alone && !weighted) {
      f.rate = 1e300;
      for (int l : links) f.rate = std::min(f.rate, cap_[size_t(l)]);
    } else {
      solve(links);
    }
    return id;
  }
  void finish(int32_t id) {
    F& f = f_[size_t(id)];
    f.active = false;
    free_.push_back(id);
    bool shared = false;
    for (int l : f.links) {
      auto& on = on_[size_t(l)];
      on.erase(std::find(on.begin(), on.end(), id));
      shared = shared || !on.empty();
    }
    if (shared) solve(f.links);
  }
  double rate(int32_t id) const { return f_[size_t(id)].rate; }
  int64_t ties = 0;  // rounds where another link had the least share too

 private:
  struct F {
    std::vector<int> links;
    std::vector<int32_t> w;
    double rate;
    bool active;
    int32_t weight(size_t i) const { return w.empty() ? 1 : w[i]; }
  };
  void solve(const std::vector<int>& from) {
    std::vector<int> links;
    std::vector<int32_t> flows;
    std::vector<char> seen_link(cap_.size(), 0), seen_flow(f_.size(), 0);
    for (int l : from)
      if (!seen_link[size_t(l)]) seen_link[size_t(l)] = 1, links.push_back(l);
    for (size_t i = 0; i < links.size(); ++i)
      for (int32_t g : on_[size_t(links[i])]) {
        if (seen_flow[size_t(g)]) continue;
        seen_flow[size_t(g)] = 1, flows.push_back(g);
        for (int m : f_[size_t(g)].links)
          if (!seen_link[size_t(m)]) seen_link[size_t(m)] = 1, links.push_back(m);
      }
    std::vector<double> left(cap_.size());
    std::vector<int32_t> open(cap_.size(), 0);
    for (int l : links) {
      left[size_t(l)] = cap_[size_t(l)];
      for (int32_t g : on_[size_t(l)]) {
        const F& fg = f_[size_t(g)];
        open[size_t(l)] += fg.weight(size_t(std::find(fg.links.begin(), fg.links.end(), l) - fg.links.begin()));
      }
    }
    for (int32_t g : flows) f_[size_t(g)].rate = -1;
    for (size_t open_flows = flows.size(); open_flows > 0;) {
      int best = -1;
      double share = 1e300;
      for (int l : links) {
        if (open[size_t(l)] == 0) continue;
        const double s = left[size_t(l)] / open[size_t(l)];
        if (s < share) share = s, best = l;
        else if (s == share) ++ties;  // a later link as tight: the earlier wins
      }
      for (int32_t g : on_[size_t(best)]) {
        F& fg = f_[size_t(g)];
        if (fg.rate >= 0) continue;
        fg.rate = share;
        for (size_t i = 0; i < fg.links.size(); ++i) {
          left[size_t(fg.links[i])] -= fg.weight(i) == 1 ? share : fg.weight(i) * share;
          open[size_t(fg.links[i])] -= fg.weight(i);
        }
        --open_flows;
      }
    }
  }
  std::vector<double> cap_;
  std::vector<std::vector<int32_t>> on_;
  std::vector<F> f_;
  std::vector<int32_t> free_;
};

TEST(FlowNetwork, RatesEqualAScanOfEveryLinkBitForBit) {
  // Whole-number capacities over few links and weights 1-3: equal shares on
  // several links at once are common, and which one freezes first moves bits.
  std::mt19937_64 rng(23);
  int64_t ties = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int links = 3 + int(rng() % 12);
    std::vector<double> caps;
    for (int l = 0; l < links; ++l) caps.push_back(double(1 + rng() % 6) * 10);
    const bool weighted = trial % 2 == 1;
    FlowNetwork net(caps);
    ScanAllLinks ref(caps);
    std::vector<int32_t> active, active_ref;
    for (int step = 0; step < 60; ++step) {
      if (!active.empty() && rng() % 3 == 0) {
        const size_t i = rng() % active.size();
        net.finish(active[i], 0);
        ref.finish(active_ref[i]);
        active.erase(active.begin() + long(i));
        active_ref.erase(active_ref.begin() + long(i));
      } else {
        const std::vector<int> r = random_route(rng, links, 4);
        std::vector<int32_t> w;
        if (weighted)
          for (size_t i = 0; i < r.size(); ++i) w.push_back(1 + int32_t(rng() % 3));
        active.push_back(net.start(r, w, 1, 0));
        active_ref.push_back(ref.start(r, w));
      }
      for (size_t i = 0; i < active.size(); ++i)
        ASSERT_EQ(net.rate(active[i]), ref.rate(active_ref[i])) << "trial " << trial << " step " << step << " flow " << i;
    }
    ties += ref.ties;
  }
  EXPECT_GT(ties, 1000) << "the cases must exercise ties";
}

TEST(FlowNetwork, SameCallsSameBits) {
  std::vector<Run::Start> flows;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50; ++i) flows.push_back({double(rng() % 30) / 7, {int(rng() % 4), 4 + int(rng() % 3)}, double(1 + rng() % 100) / 3});
  const auto a = Run::end_times({3, 5, 7, 11, 13, 17, 19}, flows);
  const auto b = Run::end_times({3, 5, 7, 11, 13, 17, 19}, flows);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
}

}  // namespace
}  // namespace rm::engine
