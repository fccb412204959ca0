// Predicted vs measured: two Timelines of one Schedule (an engine's and the
// runtime's) joined op by op (traces/timeline_join.hpp), with the error per
// op kind, rank, ring step, layer and phase, the step-time error, the ops on
// the measured critical path whose errors add most to it, and MAPE. What
// `ringmaster compare` prints; docs/compare.md defines every figure.
// Sign convention everywhere: error = predicted - measured (positive: the
// model over-predicts).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::compare {

// The step a Timeline stands for: metadata.iteration_s.median when it holds a
// number (a measured run: the median over its timed iterations of their
// aligned lengths), else its makespan. One definition for both sides, so a
// Timeline compared with itself has no step error.
double step_time_s(const traces::Timeline& t);

// One op present on both sides.
struct OpPair {
  int64_t op = -1;
  int rank = 0;
  int stream = 0;
  std::string kind;   // the event's category
  std::string name;
  int layer = -1;     // -1: not given
  int step = -1;
  std::string phase;  // empty: not given
  double predicted_start_s = 0, predicted_end_s = 0;
  double measured_start_s = 0, measured_end_s = 0;
  // A repeated measurement's spread (max - min of the op's duration over its
  // samples; 0 when not repeated): an error within it is within the run's noise.
  double measured_spread_s = 0;
  int samples = 0;
  double predicted_s() const { return predicted_end_s - predicted_start_s; }
  double measured_s() const { return measured_end_s - measured_start_s; }
  double error_s() const { return predicted_s() - measured_s(); }
};

// Errors of a set of ops.
struct Errors {
  int64_t count = 0;
  double predicted_s = 0, measured_s = 0;  // sums of durations
  double error_s = 0;                      // predicted_s - measured_s
  std::optional<double> rel_error;         // error_s / measured_s; none when measured_s == 0
  // Mean of |p - m| / m over the ops with m > 0 (none when there is none),
  // and the duration-weighted variant sum |p - m| / sum m over the same ops.
  std::optional<double> mape, weighted_mape;
  int64_t mape_ops = 0;  // ops with m > 0
  int64_t within_spread = 0;  // ops with |p - m| <= their measured spread (0 for unrepeated measurements)
};

// A row of a per-kind / rank / step / layer / phase table.
struct GroupRow {
  std::string key;  // "attn_fwd", "0", ...; "-" for ops that do not give the field
  Errors errors;
};

// An op of the measured critical path and its error.
struct Contributor {
  OpPair op;
  double error_s = 0;  // predicted - measured duration
};

struct Comparison {
  double predicted_step_s = 0, measured_step_s = 0;
  double step_error_s = 0;                // predicted - measured
  std::optional<double> step_rel_error;   // step_error_s / measured_step_s
  Errors all;                             // over every joined op
  std::vector<OpPair> ops;                // joined, by (op, rank, occurrence)
  std::vector<GroupRow> by_kind, by_phase;  // measured time descending, then key
  std::vector<GroupRow> by_rank, by_step, by_layer;  // ascending key, "-" last
  // Top contributors: the ops of the measured Timeline's critical path
  // (report::critical_path), largest |error_s| first (op id on ties), at most
  // top_n; basis says which set they were drawn from: "measured critical path",
  // or "all joined ops" when the measured Timeline has no edges to walk.
  std::vector<Contributor> top;
  std::string top_basis;
  int64_t path_ops = 0;           // joined ops on that path (or all joined ops)
  double path_error_s = 0;        // the sum of their errors: the part of the step error their durations explain
  // Ops on one side only (never dropped silently): counts per kind, and the first ids.
  int64_t predicted_only = 0, measured_only = 0;
  std::map<std::string, int64_t> predicted_only_by_kind, measured_only_by_kind;
  std::vector<int64_t> predicted_only_ops, measured_only_ops;  // at most kListedOneSided, ascending
};

inline constexpr size_t kListedOneSided = 20;

struct CompareOptions {
  std::string predicted_name = "predicted", measured_name = "measured";  // file names, for errors
  // The Schedule both ran, when known: gives the critical path each op's kind
  // and phase. Without it they come from the measured events' category and phase.
  const schedule::Schedule* schedule = nullptr;
  size_t top_n = 10;
};

// Throws ConfigError (one line naming the file) when either side has no event
// with an op id, when both carry metadata.schedule_hash and they differ, when
// their rank sets differ (different jobs), or when a joined op has another
// kind on each side (not the same Schedule).
Comparison compare(const traces::Timeline& predicted, const traces::Timeline& measured, const CompareOptions& o = {});

// Throws ConfigError naming `measured_name` unless `measured` ran Schedule s:
// its metadata.schedule_hash (when present) equals schedule_hash(s), its rank
// set is s's, every event with an op id names an op of s on that op's rank and
// of its kind, no op is on two events, and every edge names ops of s. The one
// owner of these checks: calibrate's check_run runs them too.
void check_against_schedule(const schedule::Schedule& s, const std::string& schedule_name,
                            const traces::Timeline& measured, const std::string& measured_name);

// Every table as JSON (docs/compare.md lists the keys).
nlohmann::json to_json(const Comparison& c);
// One row per joined op, with a header line.
std::string to_csv(const Comparison& c);

// One Timeline holding both, for Perfetto: predicted rank r as process r
// named "predicted rank r", measured rank r as process offset + r named
// "measured rank r" (offset: the smallest power of ten above every predicted
// and measured rank, at least 100), so the predicted group sorts above the
// measured one. Edges are left out (op ids repeat across the two sides);
// metadata holds both sides' metadata and the offset.
traces::Timeline side_by_side(const traces::Timeline& predicted, const traces::Timeline& measured);
int side_by_side_offset(const traces::Timeline& predicted, const traces::Timeline& measured);

}  // namespace rm::compare
