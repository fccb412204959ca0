// The measured Timeline: from the op times every rank recorded over K timed
// iterations to one Timeline in rank 0's clock, in the predicted Timelines'
// schema (same event names, fields, stream names and typed edges; source
// runtime-cpu / runtime-cuda), so predicted and measured join op by op. Each
// event holds the op's median start and end over the iterations and the
// spread of its duration. Also: checking that measured times respect the
// Schedule's ordering, and the bytes a rank sends rank 0 its samples in.
// docs/timeline-format.md ("Measured Timelines") documents the result.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/clock_sync.hpp"
#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::runtime {

// One timed execution of an op, on its rank's own steady clock (seconds).
struct OpSample {
  int64_t op = -1;
  int iteration = 0;  // 0-based among the timed iterations (warm-up excluded)
  double start_s = 0, end_s = 0;
  bool operator==(const OpSample&) const = default;
};

// What one rank recorded, and its clock's offset to rank 0's (rank 0: zero).
struct RankSamples {
  int rank = 0;
  ClockOffset clock;
  std::vector<OpSample> samples;
  bool operator==(const RankSamples&) const = default;
};

// Converts each rank's times to rank 0's clock (t - offset); per iteration
// subtracts that iteration's start (the earliest aligned start over all
// ranks); per op keeps the median start and the median end over the K
// iterations (K = 1 + the largest iteration seen), with samples = K and
// spread_s = max - min of its duration. Events carry what the engines' do
// (schedule::fill_event), names and edges likewise (op_events.hpp).
// `metadata` must hold "schedule_hash" (a string) and "warmup" (an integer
// >= 0); the result's metadata adds "generator", "iterations",
// "clock_offsets_s" and "clock_uncertainties_s" (per rank, by rank id),
// "max_clock_uncertainty_s", "makespan_s" (of the median events) and
// "iteration_s" {"median", "min", "max"} (each iteration's aligned length).
// Throws std::runtime_error naming the op when an op has no sample in some
// iteration or two, when a sample names an unknown op or an op of another
// rank or has end < start or a negative iteration, and naming the rank when a
// rank is unknown, given twice or has a non-finite clock offset;
// std::invalid_argument for bad metadata.
traces::Timeline measured_timeline(const schedule::Schedule& s, std::span<const RankSamples> ranks,
                                   traces::Source source, const nlohmann::json& metadata);

// Every ordering the run driver promises, checked on measured times within
// tolerance_s (the clock uncertainty): an op starts after each explicit
// dependency ended, and after every op of its stream's previous run ended
// (ops joined into one run may overlap each other); a recv ends after its
// matched send started; a collective member ends after every member started
// (a broadcast's members: after the root started). Returns one line per
// violation, naming the ops with schedule::describe, in op order; also lists
// ops with no event or several. Empty: all good.
std::vector<std::string> dependency_violations(const schedule::Schedule& s, const traces::Timeline& t,
                                               double tolerance_s);

// A rank's samples as bytes for rank 0 (same build on every rank: host byte
// order), and back; unpack throws std::runtime_error on truncated or
// malformed input.
std::string pack(const RankSamples& r);
RankSamples unpack(std::string_view bytes);

}  // namespace rm::runtime
