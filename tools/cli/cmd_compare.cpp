// `ringmaster compare`: a predicted Timeline (an engine's, or simulated here
// from a Schedule) against a measured one (ringmaster-run's) of the same
// Schedule, op by op — step-time error, per op kind / phase / rank / ring
// step / layer errors, the ops on the measured critical path that add most
// to the step error, MAPE — and optionally a CSV of every joined op and one
// Chrome trace with both Timelines one above the other. docs/compare.md.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/compare/compare.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/carried_experiment.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

struct Options {
  std::string predicted, measured, schedule_file;
  std::string engine = "analytic";
  std::vector<std::string> sets, config_dirs;
  std::string csv, trace;
  size_t top = 10;
  bool json = false;
};

// A Timeline file; a bad one is bad input (exit 2), named by the reader.
traces::Timeline read_timeline(const std::string& path) {
  try {
    return traces::read_chrome_trace(path);
  } catch (const traces::TraceError& e) {
    throw ConfigError(e.what());
  }
}

// The Schedule's experiment with the --set overrides, which may change only
// what the Schedule does not depend on (link and kernel rates: the cost model).
Experiment with_sets(const pipeline::LoadedSchedule& l, const Options& o, const ConfigStore& store) {
  if (o.sets.empty()) return l.experiment;
  nlohmann::json j = l.schedule.experiment;
  for (const std::string& set : o.sets) apply_override(j, set, store, "");
  // The loaded experiment's source: schedule_key includes it.
  Experiment e = parse_experiment(std::move(j), l.experiment.source, "", store);
  if (pipeline::schedule_key(e) != pipeline::schedule_key(l.experiment))
    throw ConfigError(fmt::format("--set: changes what {} was generated from; with --schedule only cost keys "
                                  "(cluster links and rates, kernel efficiencies) may be set",
                                  o.schedule_file));
  schedule::check_schedule_fits(l.schedule, e, o.schedule_file);
  return e;
}

std::string ms(double s) { return fmt::format("{:.4g}", s * 1e3); }
std::string pct(const std::optional<double>& v) { return v ? fmt::format("{:+.1f}%", 100 * *v) : "-"; }
std::string pct_abs(const std::optional<double>& v) { return v ? fmt::format("{:.1f}%", 100 * *v) : "-"; }

constexpr size_t kTextRows = 16;
std::string group_table(const std::string& title, const std::vector<compare::GroupRow>& rows) {
  Table t({title, "ops", "predicted ms", "measured ms", "error ms", "error %", "MAPE", "in spread"});
  for (size_t i = 0; i < rows.size() && i < kTextRows; ++i) {
    const compare::Errors& e = rows[i].errors;
    t.row({rows[i].key, std::to_string(e.count), ms(e.predicted_s), ms(e.measured_s), ms(e.error_s), pct(e.rel_error),
           pct_abs(e.mape), std::to_string(e.within_spread)});
  }
  std::string out = t.str();
  if (rows.size() > kTextRows) out += fmt::format("({} more rows in --json)\n", rows.size() - kTextRows);
  return out + "\n";
}

std::string one_sided_text(const char* side, int64_t n, const std::map<std::string, int64_t>& by_kind) {
  if (n == 0) return "";
  std::string kinds;
  for (const auto& [k, c] : by_kind) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", c, k);
  return fmt::format("{} ops only in the {} Timeline ({}): not compared\n", n, side, kinds);
}

std::string text_report(const Options& o, const compare::Comparison& c, const std::string& predicted_label) {
  std::string out = fmt::format("predicted: {}\nmeasured:  {}\n\n", predicted_label, o.measured);
  out += fmt::format("step time: predicted {} ms, measured {} ms, error {} ms ({})\n", ms(c.predicted_step_s),
                     ms(c.measured_step_s), ms(c.step_error_s), pct(c.step_rel_error));
  out += fmt::format("MAPE over {} joined ops: {} (duration-weighted {})", c.all.mape_ops, pct_abs(c.all.mape),
                     pct_abs(c.all.weighted_mape));
  if (c.all.count > c.all.mape_ops) out += fmt::format("; {} ops measured 0 s left out", c.all.count - c.all.mape_ops);
  out += "\n";
  out += one_sided_text("predicted", c.predicted_only, c.predicted_only_by_kind);
  out += one_sided_text("measured", c.measured_only, c.measured_only_by_kind);
  out += "\n";
  out += group_table("op kind", c.by_kind);
  out += group_table("phase", c.by_phase);
  out += group_table("rank", c.by_rank);
  out += group_table("ring step", c.by_step);
  out += group_table("layer", c.by_layer);
  out += fmt::format("top contributors to the step error ({}: {} ops, errors summing to {} ms of the {} ms step error)\n",
                     c.top_basis, c.path_ops, ms(c.path_error_s), ms(c.step_error_s));
  Table t({"op", "rank", "name", "predicted ms", "measured ms", "error ms", "share"});
  for (const compare::Contributor& x : c.top)
    t.row({std::to_string(x.op.op), std::to_string(x.op.rank), x.op.name, ms(x.op.predicted_s()),
           ms(x.op.measured_s()), ms(x.error_s),
           c.step_error_s != 0 ? fmt::format("{:+.1f}%", 100 * x.error_s / c.step_error_s) : "-"});
  out += t.str();
  return out;
}

void run(const Options& o) {
  if (o.predicted.empty() == o.schedule_file.empty())
    throw ConfigError("give either --predicted P.json or --schedule S.json.gz (to simulate it here), not both");
  if (o.schedule_file.empty() && (!o.sets.empty() || o.engine != "analytic"))
    throw ConfigError("--set and --engine go with --schedule (a --predicted Timeline is already simulated)");
  const auto kind = engine::parse_engine_kind(o.engine);
  if (!kind) throw ConfigError(fmt::format("--engine: expected analytic or simgrid, got \"{}\"", o.engine));

  const traces::Timeline measured = read_timeline(o.measured);
  compare::CompareOptions co;
  co.measured_name = o.measured;
  co.top_n = o.top;
  traces::Timeline predicted;
  std::optional<schedule::Schedule> sched;
  std::string label = o.predicted;
  if (!o.schedule_file.empty()) {
    const ConfigStore store(o.config_dirs);
    pipeline::LoadedSchedule loaded = pipeline::load_schedule_file(o.schedule_file, store);
    compare::check_against_schedule(loaded.schedule, o.schedule_file, measured, o.measured);
    const Experiment e = with_sets(loaded, o, store);
    pipeline::Simulation sim = pipeline::simulate_schedule(e, std::move(loaded.schedule), *kind);
    predicted = std::move(sim.timeline);
    predicted.metadata["schedule_hash"] = schedule::schedule_hash(sim.schedule);
    sched = std::move(sim.schedule);
    co.schedule = &*sched;
    co.predicted_name = o.schedule_file;
    label = fmt::format("{} simulated ({} engine)", o.schedule_file, o.engine);
  } else {
    predicted = read_timeline(o.predicted);
    co.predicted_name = o.predicted;
  }
  const compare::Comparison c = compare::compare(predicted, measured, co);

  // Everything is computed before anything is written: bad input leaves no file.
  if (!o.trace.empty()) traces::write_chrome_trace(compare::side_by_side(predicted, measured), o.trace);
  if (!o.csv.empty()) traces::write_text_file_atomic(o.csv, compare::to_csv(c));
  if (o.json) {
    nlohmann::json j = compare::to_json(c);
    j["predicted"] = label;
    j["measured"] = o.measured;
    if (!o.csv.empty()) j["csv"] = o.csv;
    if (!o.trace.empty()) j["trace"] = o.trace;
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }
  std::string text = text_report(o, c, label);
  if (!o.csv.empty()) text += fmt::format("\nper-op CSV written to {}\n", o.csv);
  if (!o.trace.empty())
    text += fmt::format("\nboth Timelines written to {} (predicted ranks above measured; open it in "
                        "https://ui.perfetto.dev)\n",
                        o.trace);
  traces::write_standard_output(text);
}

}  // namespace

void register_compare(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Predicted vs measured Timelines of one Schedule, op by op: step-time error, errors per kind, "
                 "rank, ring step and layer, top contributors, MAPE");
  cmd->add_option("--predicted", o->predicted, "The predicted Timeline (`ringmaster simulate --trace`)");
  cmd->add_option("--schedule", o->schedule_file,
                  "Or: simulate this Schedule file (with the experiment it carries) and compare that");
  cmd->add_option("--measured", o->measured, "The measured Timeline (`ringmaster-run --trace`)")->required();
  cmd->add_option("--engine", o->engine, "With --schedule: analytic or simgrid")->capture_default_str();
  // One value per flag, as add_experiment_options does.
  cmd->add_option("--set", o->sets,
                  "With --schedule: override a cost key of its experiment, path=value (one per flag, repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--configs", o->config_dirs, "Search this folder for named configs first (one per flag, repeatable)")
      ->allow_extra_args(false);
  add_output_option(cmd, "--csv", o->csv, "Write one row per joined op to this CSV file");
  add_output_option(cmd, "--trace", o->trace,
                  "Write both Timelines as one Chrome trace (predicted ranks above measured; .gz to compress)");
  cmd->add_option("--top", o->top, "Top contributors listed")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON for machines instead of tables");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
