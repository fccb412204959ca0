#include "runtime/measured_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "sim/schedule/op_events.hpp"
#include "sim/schedule/run_driver.hpp"

namespace rm::runtime {

namespace {

using schedule::describe;
using schedule::OpId;

constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();

// Median of v (reordered); the mean of the middle two for an even count. Both
// a lower and an upper median are monotone, so when every iteration has
// a <= b, median(a) <= median(b): medians keep the measured order.
double median(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : (v[k - 1] + v[k]) * 0.5;
}

void check_metadata(const nlohmann::json& m) {
  if (!m.is_object()) throw std::invalid_argument("measured timeline: metadata must be a JSON object");
  auto hash = m.find("schedule_hash");
  if (hash == m.end() || !hash->is_string())
    throw std::invalid_argument("measured timeline: metadata.schedule_hash must be a string (the Schedule's hash)");
  auto warmup = m.find("warmup");
  if (warmup == m.end() || !warmup->is_number_integer() || warmup->get<int64_t>() < 0)
    throw std::invalid_argument("measured timeline: metadata.warmup must be an integer >= 0 (warm-up iterations)");
}

}  // namespace

traces::Timeline measured_timeline(const schedule::Schedule& s, std::span<const RankSamples> ranks,
                                   traces::Source source, const nlohmann::json& metadata) {
  check_metadata(metadata);
  const size_t n = s.ops.size();
  std::vector<const RankSamples*> of_rank(s.ranks.size(), nullptr);
  int64_t iterations = 0;
  for (const RankSamples& r : ranks) {
    if (r.rank < 0 || static_cast<size_t>(r.rank) >= s.ranks.size())
      throw std::runtime_error(fmt::format("measured timeline: samples from rank {}, but the Schedule has {} ranks",
                                           r.rank, s.ranks.size()));
    if (of_rank[static_cast<size_t>(r.rank)])
      throw std::runtime_error(fmt::format("measured timeline: samples from rank {} given twice", r.rank));
    of_rank[static_cast<size_t>(r.rank)] = &r;
    if (!std::isfinite(r.clock.offset_s) || !std::isfinite(r.clock.uncertainty_s) || r.clock.uncertainty_s < 0)
      throw std::runtime_error(fmt::format("measured timeline: rank {}: clock offset {} s +- {} s, expected finite "
                                           "numbers and an uncertainty >= 0",
                                           r.rank, r.clock.offset_s, r.clock.uncertainty_s));
    for (const OpSample& x : r.samples) {
      if (x.iteration < 0)
        throw std::runtime_error(fmt::format("measured timeline: rank {}: sample of op {} has iteration {} (< 0)",
                                             r.rank, x.op, x.iteration));
      iterations = std::max(iterations, int64_t{x.iteration} + 1);
    }
  }
  if (n > 0) iterations = std::max(iterations, int64_t{1});  // no samples at all: op 0 is reported missing
  const auto K = static_cast<size_t>(iterations);

  // Every sample names an op of its rank, with sane times; counted per op.
  std::vector<size_t> count(n, 0);
  for (const RankSamples& r : ranks)
    for (const OpSample& x : r.samples) {
      if (x.op < 0 || static_cast<size_t>(x.op) >= n)
        throw std::runtime_error(fmt::format("measured timeline: rank {} sampled op {}, but the Schedule has {} ops",
                                             r.rank, x.op, n));
      const schedule::Op& op = s.ops[static_cast<size_t>(x.op)];
      if (op.rank != r.rank)
        throw std::runtime_error(fmt::format("measured timeline: {}: sampled by rank {}, but it runs on rank {}",
                                             describe(s, x.op), r.rank, op.rank));
      if (!std::isfinite(x.start_s) || !std::isfinite(x.end_s) || x.end_s < x.start_s)
        throw std::runtime_error(fmt::format("measured timeline: {}: iteration {}: expected finite times with end >= "
                                             "start, got [{}, {}]",
                                             describe(s, x.op), x.iteration, x.start_s, x.end_s));
      ++count[static_cast<size_t>(x.op)];
    }
  // An op short of K samples misses an iteration; found before the (op x
  // iteration) table is allocated, so a stray huge iteration number costs nothing.
  for (size_t op = 0; op < n; ++op) {
    if (count[op] >= K) continue;
    std::vector<int> seen;
    for (const RankSamples& r : ranks)
      for (const OpSample& x : r.samples)
        if (static_cast<size_t>(x.op) == op) seen.push_back(x.iteration);
    std::sort(seen.begin(), seen.end());
    int missing = 0;
    for (int it : seen) missing += it == missing;
    throw std::runtime_error(fmt::format("measured timeline: {}: no sample in iteration {} (of {})",
                                         describe(s, static_cast<schedule::OpId>(op)), missing, K));
  }

  // Aligned times (rank 0's clock) per (op, iteration).
  std::vector<double> start(n * K, kUnset), end(n * K, kUnset);
  for (const RankSamples& r : ranks)
    for (const OpSample& x : r.samples) {
      const size_t slot = static_cast<size_t>(x.op) * K + static_cast<size_t>(x.iteration);
      if (!std::isnan(start[slot]))
        throw std::runtime_error(
            fmt::format("measured timeline: {}: two samples in iteration {}", describe(s, x.op), x.iteration));
      start[slot] = x.start_s - r.clock.offset_s;
      end[slot] = x.end_s - r.clock.offset_s;
    }

  // Each iteration begins at its earliest aligned start over all ranks (every
  // (op, iteration) now has exactly one sample).
  std::vector<double> begin(K, std::numeric_limits<double>::infinity());
  std::vector<double> finish(K, -std::numeric_limits<double>::infinity());
  for (size_t op = 0; op < n; ++op)
    for (size_t i = 0; i < K; ++i) {
      const size_t slot = op * K + i;
      begin[i] = std::min(begin[i], start[slot]);
      finish[i] = std::max(finish[i], end[slot]);
    }

  traces::Timeline tl;
  tl.source = source;
  tl.events.reserve(n);
  std::vector<double> starts(K), ends(K), durations(K);
  for (size_t op = 0; op < n; ++op) {
    for (size_t i = 0; i < K; ++i) {
      const size_t slot = op * K + i;
      starts[i] = start[slot] - begin[i];
      ends[i] = end[slot] - begin[i];
      durations[i] = end[slot] - start[slot];
    }
    traces::Event& e = tl.events.emplace_back();
    schedule::fill_event(s.ops[op], s.desc(s.ops[op]), e);
    e.start_s = median(starts);
    e.end_s = median(ends);
    e.samples = static_cast<int>(iterations);  // <= the samples of one op, which all fit in memory
    const auto [lo, hi] = std::minmax_element(durations.begin(), durations.end());
    e.spread_s = *hi - *lo;
  }
  tl.sort();
  schedule::name_ranks_and_streams(s, tl);
  tl.edges = schedule::timeline_edges(s, schedule::RunPlan(s));

  tl.metadata = metadata;
  tl.metadata["generator"] = s.generator;
  tl.metadata["iterations"] = iterations;
  nlohmann::json offsets = nlohmann::json::array(), uncertainties = nlohmann::json::array();
  double max_uncertainty = 0;
  for (const RankSamples* r : of_rank) {
    offsets.push_back(r ? nlohmann::json(r->clock.offset_s) : nlohmann::json());
    uncertainties.push_back(r ? nlohmann::json(r->clock.uncertainty_s) : nlohmann::json());
    if (r) max_uncertainty = std::max(max_uncertainty, r->clock.uncertainty_s);
  }
  tl.metadata["clock_offsets_s"] = std::move(offsets);
  tl.metadata["clock_uncertainties_s"] = std::move(uncertainties);
  tl.metadata["max_clock_uncertainty_s"] = max_uncertainty;
  tl.metadata["makespan_s"] = tl.makespan_s();
  std::vector<double> lengths(K);
  for (size_t i = 0; i < K; ++i) lengths[i] = finish[i] - begin[i];
  if (K > 0) {
    const auto [lo, hi] = std::minmax_element(lengths.begin(), lengths.end());
    const double min = *lo, max = *hi;
    tl.metadata["iteration_s"] = {{"median", median(lengths)}, {"min", min}, {"max", max}};
  }
  return tl;
}

std::vector<std::string> dependency_violations(const schedule::Schedule& s, const traces::Timeline& t,
                                               double tolerance_s) {
  const size_t n = s.ops.size();
  std::vector<std::pair<OpId, std::string>> found;  // (the op it is about, line)
  std::vector<const traces::Event*> ev(n, nullptr);
  std::vector<int> count(n, 0);
  for (const traces::Event& e : t.events) {
    if (e.op < 0) continue;
    if (static_cast<size_t>(e.op) >= n) {
      found.emplace_back(e.op, fmt::format("event of op {} on rank {}: the Schedule has {} ops", e.op, e.rank, n));
      continue;
    }
    ++count[static_cast<size_t>(e.op)];
    ev[static_cast<size_t>(e.op)] = &e;
  }
  for (size_t op = 0; op < n; ++op)
    if (count[op] != 1)
      found.emplace_back(op, fmt::format("{}: {} events in the Timeline, expected one",
                                         describe(s, static_cast<OpId>(op)), count[op]));
  auto at = [&](OpId op) { return count[static_cast<size_t>(op)] == 1 ? ev[static_cast<size_t>(op)] : nullptr; };
  constexpr double us = 1e6;

  const schedule::RunPlan plan(s);
  for (const traces::Edge& edge : schedule::timeline_edges(s, plan)) {
    const traces::Event* from = at(edge.from);
    const traces::Event* to = at(edge.to);
    if (!from || !to) continue;
    switch (edge.kind) {
      case traces::EdgeKind::dependency:
      case traces::EdgeKind::stream:
        if (to->start_s < from->end_s - tolerance_s)
          found.emplace_back(edge.to, fmt::format("{} started {:.3f} us before {} ended ({})", describe(s, edge.to),
                                                  (from->end_s - to->start_s) * us, describe(s, edge.from),
                                                  edge.kind == traces::EdgeKind::stream
                                                      ? "the previous run on its stream"
                                                      : "a dependency of its run"));
        break;
      case traces::EdgeKind::p2p:
        if (to->end_s < from->start_s - tolerance_s)
          found.emplace_back(edge.to, fmt::format("{} ended {:.3f} us before its send {} started", describe(s, edge.to),
                                                  (from->start_s - to->end_s) * us, describe(s, edge.from)));
        break;
      case traces::EdgeKind::collective:
        break;  // a star from the first member: checked below, every member against every other
      case traces::EdgeKind::launch:
      case traces::EdgeKind::sync:
        break;  // imported traces only: timeline_edges never makes them
    }
  }
  // A collective member cannot end before every member (a broadcast: the root) started.
  for (const auto& call : plan.match.calls) {
    OpId latest = -1;
    for (OpId m : call) {
      const traces::Event* e = m >= 0 ? at(m) : nullptr;
      if (!e) continue;
      const schedule::Op& op = s.ops[static_cast<size_t>(m)];
      const bool counts = op.kind != schedule::OpKind::broadcast || op.peer == op.rank;
      if (counts && (latest < 0 || e->start_s > at(latest)->start_s)) latest = m;
    }
    if (latest < 0) continue;
    for (OpId m : call) {
      const traces::Event* e = m >= 0 ? at(m) : nullptr;
      if (e && m != latest && e->end_s < at(latest)->start_s - tolerance_s)
        found.emplace_back(m, fmt::format("{} ended {:.3f} us before {} of the same collective call started",
                                          describe(s, m), (at(latest)->start_s - e->end_s) * us, describe(s, latest)));
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& [op, line] : found) out.push_back(std::move(line));
  return out;
}

namespace {

constexpr char kMagic[4] = {'r', 'm', 'S', '1'};
constexpr size_t kHeader = sizeof kMagic + sizeof(int32_t) + 2 * sizeof(double) + sizeof(uint64_t);
constexpr size_t kRecord = sizeof(int64_t) + sizeof(int32_t) + 2 * sizeof(double);

template <class T>
void put(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

template <class T>
T take(std::string_view& in) {
  T v;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return v;
}

}  // namespace

std::string pack(const RankSamples& r) {
  std::string out;
  out.reserve(kHeader + r.samples.size() * kRecord);
  out.append(kMagic, sizeof kMagic);
  put<int32_t>(out, r.rank);
  put<double>(out, r.clock.offset_s);
  put<double>(out, r.clock.uncertainty_s);
  put<uint64_t>(out, r.samples.size());
  for (const OpSample& x : r.samples) {
    put<int64_t>(out, x.op);
    put<int32_t>(out, x.iteration);
    put<double>(out, x.start_s);
    put<double>(out, x.end_s);
  }
  return out;
}

RankSamples unpack(std::string_view in) {
  if (in.size() < kHeader || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    throw std::runtime_error(fmt::format("rank samples: {} bytes do not start with a samples header ({} bytes)",
                                         in.size(), kHeader));
  in.remove_prefix(sizeof kMagic);
  RankSamples r;
  r.rank = take<int32_t>(in);
  r.clock.offset_s = take<double>(in);
  r.clock.uncertainty_s = take<double>(in);
  const auto count = take<uint64_t>(in);
  if (count > in.size() / kRecord || in.size() != count * kRecord)
    throw std::runtime_error(fmt::format("rank samples from rank {}: {} bytes after the header, expected {} samples "
                                         "of {} bytes (truncated or corrupt)",
                                         r.rank, in.size(), count, kRecord));
  r.samples.resize(count);
  for (OpSample& x : r.samples) {
    x.op = take<int64_t>(in);
    x.iteration = take<int32_t>(in);
    x.start_s = take<double>(in);
    x.end_s = take<double>(in);
  }
  return r;
}

}  // namespace rm::runtime
