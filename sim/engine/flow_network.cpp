#include "sim/engine/flow_network.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace rm::engine {

FlowNetwork::FlowNetwork(std::vector<double> capacity_Bps)
    : capacity_(std::move(capacity_Bps)),
      on_link_(capacity_.size()),
      weight_on_(capacity_.size(), 0),
      binding_(capacity_.size(), 0),
      link_mark_(capacity_.size(), 0),
      left_(capacity_.size(), 0.0),
      open_(capacity_.size(), 0) {
  for (double c : capacity_)
    if (!(c > 0)) throw std::invalid_argument("FlowNetwork: every link needs a capacity > 0");
}

int32_t FlowNetwork::start(std::span<const int> links, std::span<const int32_t> weights, double bytes, double now) {
  if (links.empty()) throw std::invalid_argument("FlowNetwork::start: a flow needs at least one link");
  if (!weights.empty() && weights.size() != links.size())
    throw std::invalid_argument("FlowNetwork::start: one weight per link");
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<int32_t>(flows_.size());
    flows_.emplace_back();
    old_rate_.push_back(0);
  }
  Flow& f = flows_[static_cast<size_t>(id)];
  f.links.assign(links.begin(), links.end());
  f.weights.assign(weights.begin(), weights.end());
  bool weighted = false;
  for (int32_t w : weights) weighted = weighted || w != 1;
  if (!weighted) f.weights.clear();
  f.remaining = bytes;
  f.since = now;
  f.rate = 0;
  f.active = true;
  rescheduled_.clear();
  bool alone = true;
  for (int l : links) alone = alone && on_link_[static_cast<size_t>(l)].empty();
  for (size_t i = 0; i < links.size(); ++i) {
    on_link_[static_cast<size_t>(links[i])].push_back(id);
    weight_on_[static_cast<size_t>(links[i])] += f.weights.empty() ? 1 : f.weights[i];
  }
  if (alone && !weighted) {  // its route's slowest link, exactly as CostModel::transfer_seconds takes it
    double rate = std::numeric_limits<double>::infinity();
    for (int l : links) rate = std::min(rate, capacity_[static_cast<size_t>(l)]);
    for (int l : links)
      if (capacity_[static_cast<size_t>(l)] == rate) binding_[static_cast<size_t>(l)] = 1;
    f.rate = rate;
    ++f.version;
    rescheduled_.push_back(id);
    return id;
  }
  solve_around(links, now);
  return id;
}

void FlowNetwork::finish(int32_t id, double now) {
  Flow& f = flows_[static_cast<size_t>(id)];
  if (!f.active) throw std::logic_error("FlowNetwork::finish: the flow is not active");
  f.active = false;
  f.remaining = 0;
  f.rate = 0;
  ++f.version;  // events still queued for it are stale
  free_.push_back(id);
  rescheduled_.clear();
  bool shared = false;
  for (size_t i = 0; i < f.links.size(); ++i) {
    const auto l = static_cast<size_t>(f.links[i]);
    auto& on = on_link_[l];
    on.erase(std::find(on.begin(), on.end(), id));  // keeps the others in start order
    weight_on_[l] -= f.weights.empty() ? 1 : f.weights[i];
    shared = shared || !on.empty();
  }
  if (shared) solve_around(f.links, now);
}

double FlowNetwork::end_time(int32_t id) const {
  const Flow& f = flows_[static_cast<size_t>(id)];
  return f.since + f.remaining / f.rate;
}

void FlowNetwork::set_rate(Flow& f, int32_t id, double rate, double now) {
  const double old = old_rate_[static_cast<size_t>(id)];
  f.rate = rate;
  if (rate == old) return;  // untouched: no settling, no rounding drift, no new event
  f.remaining = std::max(0.0, f.remaining - old * (now - f.since));
  f.since = now;
  ++f.version;
  rescheduled_.push_back(id);
}

void FlowNetwork::solve_around(std::span<const int> links, double now) {
  // The component: a breadth-first walk over links and the flows on them.
  ++stamp_;
  comp_links_.clear();
  comp_flows_.clear();
  for (int l : links)
    if (link_mark_[static_cast<size_t>(l)] != stamp_) link_mark_[static_cast<size_t>(l)] = stamp_, comp_links_.push_back(l);
  for (size_t i = 0; i < comp_links_.size(); ++i)
    for (int32_t g : on_link_[static_cast<size_t>(comp_links_[i])]) {
      Flow& fg = flows_[static_cast<size_t>(g)];
      if (fg.mark == stamp_) continue;
      fg.mark = stamp_;
      comp_flows_.push_back(g);
      for (int m : fg.links)
        if (link_mark_[static_cast<size_t>(m)] != stamp_) link_mark_[static_cast<size_t>(m)] = stamp_, comp_links_.push_back(m);
    }
  ++solves_;
  solved_flows_ += static_cast<int64_t>(comp_flows_.size());

  // Progressive filling: raise every open flow's rate together; the link whose
  // capacity runs out first (least capacity left per open flow) freezes its
  // open flows at that share; repeat until every flow is frozen.
  for (int l : comp_links_) {
    left_[static_cast<size_t>(l)] = capacity_[static_cast<size_t>(l)];
    open_[static_cast<size_t>(l)] = weight_on_[static_cast<size_t>(l)];
  }
  for (int32_t g : comp_flows_) {
    Flow& fg = flows_[static_cast<size_t>(g)];
    old_rate_[static_cast<size_t>(g)] = fg.rate;
    fg.rate = -1;  // open
  }
  size_t open_flows = comp_flows_.size();
  // The links still carrying open flows, in comp_links_ order: each scan drops
  // those left without (they never get one back), so a large component's later
  // rounds visit fewer links. The order, so every choice, is the full scan's.
  live_.assign(comp_links_.begin(), comp_links_.end());
  while (open_flows > 0) {
    int best = -1;
    double share = std::numeric_limits<double>::infinity();
    size_t kept = 0;
    for (int l : live_) {
      const int32_t n = open_[static_cast<size_t>(l)];
      if (n == 0) continue;
      live_[kept++] = l;
      const double s = left_[static_cast<size_t>(l)] / n;
      if (s < share) share = s, best = l;  // ties: the first link found, so deterministic
    }
    live_.resize(kept);
    binding_[static_cast<size_t>(best)] = 1;
    for (int32_t g : on_link_[static_cast<size_t>(best)]) {
      Flow& fg = flows_[static_cast<size_t>(g)];
      if (fg.rate >= 0) continue;
      fg.rate = share;
      for (size_t i = 0; i < fg.links.size(); ++i) {
        const auto m = static_cast<size_t>(fg.links[i]);
        if (fg.weights.empty() || fg.weights[i] == 1) {
          left_[m] -= share;
          --open_[m];
        } else {  // the flow's translates on this link take their shares too
          left_[m] -= fg.weights[i] * share;
          open_[m] -= fg.weights[i];
        }
      }
      --open_flows;
    }
  }
  for (int32_t g : comp_flows_) {
    Flow& fg = flows_[static_cast<size_t>(g)];
    set_rate(fg, g, fg.rate, now);
  }
}

}  // namespace rm::engine
