// What every ringmaster command shares: how an experiment is named and
// overridden on the command line, progress on a terminal, and plain tables.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/config/experiment.hpp"

namespace rm::cli {

struct ExperimentOptions {
  std::string file;                      // experiment JSON or name; empty = embedded default
  std::vector<std::string> sets;         // --set path=value, applied in order
  std::vector<std::string> config_dirs;  // --configs DIR, searched before the embedded configs
  bool json = false;

  ConfigStore store() const { return ConfigStore(config_dirs); }
  // Loads the experiment; its warnings wait for print_warnings().
  Experiment load() const;
};

// Prints the loaded experiments' warnings on stderr, one line each: main() calls it
// once the command succeeded, so bad input stays one line of error.
void print_warnings();

// Adds [EXPERIMENT] --set --configs --json to a subcommand.
void add_experiment_options(CLI::App* cmd, ExperimentOptions& o);

// Adds an option naming a file to write. A destination that cannot be one (an
// empty path, a directory, a missing folder) is refused as the command line is
// read, before any work: exit 2 (README.md, "Exit status").
CLI::Option* add_output_option(CLI::App* cmd, const std::string& flags, std::string& path, const std::string& help);

// The head of a text report: the resolved experiment (every key of
// summary_json), the pattern, attention kernel (and why it was chosen) and
// framework profile in effect, and a line saying so when it uses fewer GPUs
// than the cluster has.
std::string experiment_header(const Experiment& e);
// "pattern P (kind), attention kernel K, framework profile F": what a report's head names.
std::string setup_words(const Experiment& e);

// Progress on stderr, only when it is a terminal and output is not JSON.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ~ProgressLine();
  void update(const std::string& what, int done, int total);

 private:
  bool on_;
  bool drawn_ = false;
};

// Progress of many points (a sweep's, a plan's) on stderr: on a terminal a bar
// with points done, rate and ETA, redrawn at most ten times a second; otherwise
// a plain line every `plain_every` (logs of batch jobs), none for short runs.
class PointProgress {
 public:
  PointProgress(std::string what, bool enabled, std::chrono::seconds plain_every = std::chrono::seconds(10),
                std::string unit = "points");
  ~PointProgress();
  void update(int64_t done, int64_t total);

 private:
  std::string what_, unit_;
  bool on_, terminal_;
  std::chrono::steady_clock::duration plain_every_;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
};

// "42 s", "3m05s", "2h10m": a duration for people.
std::string human_duration(double seconds);

// A text table with right-aligned numeric columns.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Commands (one file each).
void register_compare(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_diff(CLI::App& app);
void register_imbalance(CLI::App& app);
void register_import(CLI::App& app);
void register_init(CLI::App& app);
void register_plan(CLI::App& app);
void register_replay(CLI::App& app);
void register_schedule(CLI::App& app);
void register_simulate(CLI::App& app);
void register_sweep(CLI::App& app);

}  // namespace rm::cli
