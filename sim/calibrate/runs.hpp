// The inputs of a calibration: runs, each a Schedule (with the experiment it
// carries) and the Timeline measured executing it (ringmaster-run --trace),
// checked to belong together; where the step time of a measured run is read;
// and the deterministic split of runs into fitted and held-out ones.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"
#include "traces/timeline.hpp"

namespace rm::calibrate {

struct Run {
  std::string name;  // how messages and reports name it (the measured file's path)
  schedule::Schedule schedule;
  Experiment experiment;
  traces::Timeline measured;
};

// Reads both files (ConfigError naming the file on any problem) and checks
// them with check_run.
Run load_run(const std::string& schedule_path, const std::string& measured_path, const ConfigStore& store);

// Throws ConfigError naming r.name when the Timeline's metadata.schedule_hash
// is missing, when compare::check_against_schedule refuses the pair (an event
// on an op the Schedule lacks, on another rank or kind, two events on one op,
// an edge naming an op it lacks), or when an op has no event or one with
// times that are not finite.
void check_run(const Run& r);

// The pairs in a folder: every NAME.schedule.json[.gz] with its
// NAME.measured.json[.gz], sorted by NAME; ConfigError when a Schedule has no
// measured file, or the folder holds no pair.
std::vector<std::pair<std::string, std::string>> runs_in_folder(const std::string& dir);

// The measured step: the median of the timed iterations' lengths
// (metadata.iteration_s.median), else the Timeline's makespan.
double measured_step_s(const traces::Timeline& t);

// Which of n runs are held out: round(fraction * n) of them (at least one when
// fraction > 0, never all: one run is always fitted), drawn by a Fisher-Yates
// shuffle on mt19937_64(seed), so the split is the same on every platform.
// Ascending indices. Throws std::invalid_argument unless 0 <= fraction < 1.
std::vector<size_t> holdout_indices(size_t n, double fraction, uint64_t seed);

}  // namespace rm::calibrate
