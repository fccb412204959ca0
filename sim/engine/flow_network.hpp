// A fluid network for the analytic engine: flows of bytes over routes of
// directed links, each link's capacity shared among the flows on it by max-min
// fairness (progressive filling), as SimGrid's flow model shares it.
//
// Rates are recomputed only when a flow starts or finishes on a link that
// other flows use, and only for the connected component of flows that share
// links (transitively) with it; a flow alone on its links gets its route's
// slowest capacity without any solver work. Each flow knows when its bytes
// will be done at its current rate; a recomputation that changes a flow's rate
// bumps its version, so the caller can drop the completion events it queued
// before (it keeps (flow, version) with each event).
//
// Weights (the data-parallel shortcut, symmetry.hpp): a flow may stand for w flows
// on a link, its translates; it then takes w times its rate from that link's
// capacity. Without weights (all 1) every figure is what it was, bit for bit.
//
// Deterministic: the same calls in the same order give bit-identical results.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rm::engine {

class FlowNetwork {
 public:
  // capacity_Bps[l]: bytes/s of link l (> 0).
  explicit FlowNetwork(std::vector<double> capacity_Bps);

  // A flow of `bytes` over `links` (a non-empty route) starting at `now`;
  // returns its id (ids of finished flows are reused).
  int32_t start(std::span<const int> links, double bytes, double now) { return start(links, {}, bytes, now); }
  // The same with a weight per link (weights empty: all 1; else links are distinct).
  int32_t start(std::span<const int> links, std::span<const int32_t> weights, double bytes, double now);
  // Flow f's bytes are done at `now` (its end_time): it leaves its links.
  void finish(int32_t f, double now);

  double rate(int32_t f) const { return flows_[static_cast<size_t>(f)].rate; }
  // When f's bytes will be done if no rate changes again.
  double end_time(int32_t f) const;
  uint32_t version(int32_t f) const { return flows_[static_cast<size_t>(f)].version; }
  // The flows whose rate (so end_time and version) the last start or finish
  // changed, the started flow included.
  const std::vector<int32_t>& rescheduled() const { return rescheduled_; }

  // Per link: 1 once its capacity set some flow's rate (the slowest link of a
  // flow alone on its route, or the link a progressive filling froze flows on;
  // ties count). A link never marked only ever compared as roomier than the
  // one that set the rate; with more capacity it would again (each of its
  // shares only grows: the run reads it in subtractions and a division, all
  // monotone), so the same run on raised capacities of unmarked links takes
  // every decision as this one did, bit for bit (AnalyticReuse relies on it).
  const std::vector<char>& binding() const { return binding_; }
  const std::vector<double>& capacity() const { return capacity_; }

  // How much solver work ran: components solved and the flows in them.
  int64_t solves() const { return solves_; }
  int64_t solved_flows() const { return solved_flows_; }

 private:
  struct Flow {
    std::vector<int> links;
    std::vector<int32_t> weights;  // per link; empty: all 1
    double remaining = 0;  // bytes left at `since`
    double since = 0;
    double rate = 0;
    uint32_t version = 0;
    uint32_t mark = 0;
    bool active = false;
  };
  // The component of the flows on `links` (every flow sharing a link with
  // them, transitively) gets its max-min rates; flows whose rate changed are
  // settled at `now` and listed in rescheduled_.
  void solve_around(std::span<const int> links, double now);
  void set_rate(Flow& f, int32_t id, double rate, double now);

  std::vector<double> capacity_;
  std::vector<std::vector<int32_t>> on_link_;  // active flows per link
  std::vector<int32_t> weight_on_;             // per link: the weights of its active flows, summed
  std::vector<Flow> flows_;
  std::vector<int32_t> free_;
  std::vector<int32_t> rescheduled_;
  std::vector<char> binding_;  // per link (binding())
  // Scratch of solve_around, kept to avoid allocations.
  std::vector<uint32_t> link_mark_;
  uint32_t stamp_ = 0;
  std::vector<int32_t> comp_flows_;
  std::vector<int> comp_links_;
  std::vector<int> live_;  // solve_around: the component's links that still carry open flows
  std::vector<double> left_;   // per link: capacity not yet given to frozen flows
  std::vector<int32_t> open_;  // per link: weights of the flows on it not yet frozen
  std::vector<double> old_rate_;
  int64_t solves_ = 0, solved_flows_ = 0;
};

}  // namespace rm::engine
