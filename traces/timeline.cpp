#include "traces/timeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace rm::traces {

namespace {
constexpr std::array<std::string_view, 5> kSourceNames = {"analytic", "simgrid", "runtime-cpu", "runtime-cuda",
                                                          "kineto"};
constexpr std::array<std::string_view, kEdgeKindCount> kEdgeKindNames = {"stream", "dependency", "p2p", "collective",
                                                                          "launch", "sync"};

auto order_key(const Event& e) { return std::tie(e.rank, e.stream, e.start_s, e.end_s, e.op, e.name); }

bool time_close(double a, double b) {
  return std::fabs(a - b) <= std::max(1e-18, kTimeRoundTripRelTol * std::max(std::fabs(a), std::fabs(b)));
}

bool approx_equal(const Event& a, const Event& b) {
  return a.op == b.op && a.rank == b.rank && a.stream == b.stream && a.name == b.name &&
         a.category == b.category && time_close(a.start_s, b.start_s) && time_close(a.end_s, b.end_s) &&
         a.layer == b.layer && a.phase == b.phase && a.step == b.step && a.bytes == b.bytes &&
         a.flops == b.flops && a.samples == b.samples && time_close(a.spread_s, b.spread_s);
}

std::vector<const Event*> by_start(std::vector<const Event*> v) {
  std::stable_sort(v.begin(), v.end(), [](const Event* a, const Event* b) { return canonical_less(*a, *b); });
  return v;
}
}  // namespace

bool canonical_less(const Event& a, const Event& b) { return order_key(a) < order_key(b); }

std::string_view to_string(Source s) { return kSourceNames.at(static_cast<size_t>(s)); }

std::optional<Source> parse_source(std::string_view s) {
  for (size_t i = 0; i < kSourceNames.size(); ++i)
    if (kSourceNames[i] == s) return static_cast<Source>(i);
  return std::nullopt;
}

std::string_view to_string(EdgeKind k) { return kEdgeKindNames.at(static_cast<size_t>(k)); }

std::optional<EdgeKind> parse_edge_kind(std::string_view s) {
  for (size_t i = 0; i < kEdgeKindNames.size(); ++i)
    if (kEdgeKindNames[i] == s) return static_cast<EdgeKind>(i);
  return std::nullopt;
}

void Timeline::sort() {
  std::stable_sort(events.begin(), events.end(), canonical_less);
}

double Timeline::begin_s() const {
  if (events.empty()) return 0.0;
  double t = events.front().start_s;
  for (const auto& e : events) t = std::min(t, e.start_s);
  return t;
}

double Timeline::end_s() const {
  if (events.empty()) return 0.0;
  double t = events.front().end_s;
  for (const auto& e : events) t = std::max(t, e.end_s);
  return t;
}

double Timeline::makespan_s() const { return end_s() - begin_s(); }

std::vector<int> Timeline::ranks() const {
  std::set<int> r;
  for (const auto& e : events) r.insert(e.rank);
  return {r.begin(), r.end()};
}

std::vector<StreamKey> Timeline::streams() const {
  std::set<StreamKey> r;
  for (const auto& e : events) r.insert({e.rank, e.stream});
  return {r.begin(), r.end()};
}

std::vector<const Event*> Timeline::on_rank(int rank) const {
  std::vector<const Event*> v;
  for (const auto& e : events)
    if (e.rank == rank) v.push_back(&e);
  return by_start(std::move(v));
}

std::vector<const Event*> Timeline::on_stream(int rank, int stream) const {
  std::vector<const Event*> v;
  for (const auto& e : events)
    if (e.rank == rank && e.stream == stream) v.push_back(&e);
  return by_start(std::move(v));
}

std::string Timeline::rank_name(int rank) const {
  auto it = rank_names.find(rank);
  return it != rank_names.end() ? it->second : fmt::format("rank {}", rank);
}

std::string Timeline::stream_name(int rank, int stream) const {
  auto it = stream_names.find({rank, stream});
  return it != stream_names.end() ? it->second : fmt::format("stream {}", stream);
}

bool approx_equal(const Timeline& a, const Timeline& b) {
  if (a.source != b.source || a.metadata != b.metadata || a.rank_names != b.rank_names ||
      a.stream_names != b.stream_names || a.edges != b.edges || a.events.size() != b.events.size())
    return false;
  Timeline sa = a, sb = b;
  sa.sort();
  sb.sort();
  for (size_t i = 0; i < sa.events.size(); ++i)
    if (!approx_equal(sa.events[i], sb.events[i])) return false;
  return true;
}

}  // namespace rm::traces
