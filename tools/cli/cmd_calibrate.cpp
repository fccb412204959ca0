// `ringmaster calibrate`: fits a cluster's cost-model parameters (GEMM and
// elementwise efficiency, kernel launch, link bandwidths and latencies, the
// attention kernel's rate table) to measured Timelines of the Schedules that
// produced them, writes the calibrated cluster and kernel JSON and the fit's
// residuals, and with --holdout reports how well the calibrated model predicts
// runs it was not fitted on. A table by default, --json for machines.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/calibrate/fit.hpp"
#include "sim/calibrate/validate.hpp"
#include "sim/config/json_reader.hpp"
#include "traces/text_file.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

using nlohmann::json;

struct Options {
  std::vector<std::string> runs;
  std::string runs_dir, cluster, out, kernel_out, residuals;
  std::vector<std::string> config_dirs;
  double holdout = 0;
  uint64_t seed = 1;
  bool json = false;
};

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string note(const calibrate::ParamFit& p) {
  if (p.scaled) return "not exercised: scaled with its curve's nearest fitted point";
  if (!p.exercised) return "not exercised: unchanged";
  if (!p.determined) return "undetermined (moves with others)";
  if (p.at_bound) return "at its bound";
  return "";
}

json kinds_json(const std::vector<calibrate::KindCheck>& ks) {
  json out = json::array();
  for (const auto& k : ks)
    out.push_back({{"kind", k.kind}, {"observations", k.observations}, {"measured_s", k.measured_s},
                   {"before_s", k.before_s}, {"after_s", k.after_s}, {"mape_before", k.mape_before},
                   {"mape_after", k.mape_after}});
  return out;
}

json steps_json(const calibrate::Validation& v) {
  json steps = json::array();
  for (const auto& s : v.steps)
    steps.push_back({{"run", s.run}, {"measured_s", s.measured_s}, {"predicted_before_s", s.before_s},
                     {"predicted_after_s", s.after_s}, {"error_before", s.error_before()}, {"error_after", s.error_after()}});
  return {{"steps", steps}, {"step_mape_before", v.mape_before}, {"step_mape_after", v.mape_after}, {"kinds", kinds_json(v.kinds)}};
}

std::string pct(double x) { return fmt::format("{:+.1f}%", 100 * x); }

std::string kinds_text(const std::vector<calibrate::KindCheck>& ks) {
  Table t({"op kind", "observations", "measured s", "MAPE before", "MAPE after"});
  for (const auto& k : ks)
    t.row({k.kind, std::to_string(k.observations), fmt::format("{:.6g}", k.measured_s),
           fmt::format("{:.1f}%", 100 * k.mape_before), fmt::format("{:.1f}%", 100 * k.mape_after)});
  return t.str();
}

std::string steps_text(const calibrate::Validation& v) {
  Table t({"run", "measured s", "before s", "error", "after s", "error"});
  for (const auto& s : v.steps)
    t.row({s.run, fmt::format("{:.6g}", s.measured_s), fmt::format("{:.6g}", s.before_s), pct(s.error_before()),
           fmt::format("{:.6g}", s.after_s), pct(s.error_after())});
  return t.str() + fmt::format("step-time MAPE: {:.1f}% before, {:.1f}% after\n", 100 * v.mape_before, 100 * v.mape_after);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void run(const Options& o) {
  const ConfigStore store(o.config_dirs);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& r : o.runs) {
    const size_t eq = r.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == r.size())
      throw ConfigError(fmt::format("--run {}: expected SCHEDULE=MEASURED (a Schedule file and its measured Timeline)", r));
    pairs.emplace_back(r.substr(0, eq), r.substr(eq + 1));
  }
  if (!o.runs_dir.empty())
    for (auto& p : calibrate::runs_in_folder(o.runs_dir)) pairs.push_back(std::move(p));
  if (pairs.empty()) throw ConfigError("no runs: give --run SCHEDULE=MEASURED (repeatable) or --runs DIR");
  if (!(o.holdout >= 0 && o.holdout < 1)) throw ConfigError(fmt::format("--holdout: expected a fraction in [0, 1), got {}", o.holdout));

  std::vector<calibrate::Run> runs;
  for (const auto& [s, m] : pairs) runs.push_back(calibrate::load_run(s, m, store));

  // The base: --cluster, else the first run's cluster as its experiment resolved it.
  const Experiment& first = runs.front().experiment;
  json base_cluster_json = first.resolved["cluster"];
  calibrate::CostParams base{first.cluster, first.kernel};
  if (!o.cluster.empty()) {
    const LoadedConfig c = store.load("clusters", o.cluster, "--cluster");
    base_cluster_json = c.json;
    base.cluster = parse_cluster(JsonReader(c.json, c.source));
  }
  const json base_kernel_json = first.resolved["kernel"]["attention"];

  const std::vector<size_t> held = calibrate::holdout_indices(runs.size(), o.holdout, o.seed);
  std::vector<const calibrate::Run*> fit_runs, held_runs;
  for (size_t i = 0, h = 0; i < runs.size(); ++i) {
    if (h < held.size() && held[h] == i) {
      held_runs.push_back(&runs[i]);
      ++h;
    } else {
      fit_runs.push_back(&runs[i]);
    }
  }
  const calibrate::FitResult fit = calibrate::fit(fit_runs, base);
  const calibrate::Validation in_sample = calibrate::validate(fit_runs, base, fit.fitted);
  std::optional<calibrate::Validation> holdout;
  if (!held_runs.empty()) holdout = calibrate::validate(held_runs, base, fit.fitted);

  // The outputs, each checked to load before anything is written.
  const std::string what = fmt::format("calibrated by `ringmaster calibrate` from {} run(s) of {} on {}", fit_runs.size(),
                                       base.kernel.name, base.cluster.gpu.model);
  json cluster_out = calibrate::cluster_json(base_cluster_json, fit.fitted.cluster, what + "; base: " + base.cluster.name);
  cluster_out["name"] = base.cluster.name + "-calibrated";
  parse_cluster(JsonReader(cluster_out, o.out));
  std::string kernel_out = o.kernel_out;
  if (kernel_out.empty())
    kernel_out = (o.out.ends_with(".json") ? o.out.substr(0, o.out.size() - 5) : o.out) + ".kernel.json";
  json kernel_j = calibrate::kernel_json(base_kernel_json, fit.fitted.kernel, base.cluster.gpu.model, what);
  kernel_j["name"] = base.kernel.name + "-calibrated";
  parse_attention_kernel(JsonReader(kernel_j, kernel_out), fit.fitted.cluster.gpu);

  std::string csv;
  if (!o.residuals.empty()) {
    csv = "set,run,op,kind,rank,phase,layer,step,measured_s,before_s,after_s,error_before,error_after\n";
    auto rows = [&](const char* set, const std::vector<const calibrate::Run*>& rs,
                    const std::vector<calibrate::Observation>& obs, const std::vector<double>& before,
                    const std::vector<double>& after) {
      for (size_t i = 0; i < obs.size(); ++i) {
        const schedule::Op& op = rs[obs[i].run]->schedule.ops[size_t(obs[i].op)];
        csv += fmt::format("{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g}\n", set,
                           csv_field(rs[obs[i].run]->name), op.id, obs[i].kind, op.rank, schedule::to_string(op.phase),
                           op.layer, op.step, obs[i].measured_s, before[i], after[i],
                           (before[i] - obs[i].measured_s) / obs[i].measured_s,
                           (after[i] - obs[i].measured_s) / obs[i].measured_s);
      }
    };
    rows("fit", fit_runs, fit.observations, fit.before_s, fit.after_s);
    std::vector<calibrate::Observation> hobs;
    for (size_t i = 0; i < held_runs.size(); ++i)
      for (auto& ob : calibrate::observations(*held_runs[i], i)) hobs.push_back(std::move(ob));
    rows("holdout", held_runs, hobs, calibrate::model_seconds(held_runs, hobs, base),
         calibrate::model_seconds(held_runs, hobs, fit.fitted));
  }
  traces::write_text_file_atomic(o.out, cluster_out.dump(2) + "\n");
  traces::write_text_file_atomic(kernel_out, kernel_j.dump(2) + "\n");
  if (!o.residuals.empty()) traces::write_text_file_atomic(o.residuals, csv);

  const auto fit_kinds = calibrate::kind_checks(fit.observations, fit.before_s, fit.after_s);
  if (o.json) {
    json params = json::array();
    for (const auto& p : fit.params)
      params.push_back({{"name", p.name}, {"base", p.base}, {"fitted", p.fitted}, {"std_error", number_or_null(p.std_error)},
                        {"rows", p.rows}, {"exercised", p.exercised}, {"determined", p.determined},
                        {"at_bound", p.at_bound}, {"scaled", p.scaled}});
    json fitted_names = json::array(), held_names = json::array();
    for (const auto* r : fit_runs) fitted_names.push_back(r->name);
    for (const auto* r : held_runs) held_names.push_back(r->name);
    json j{{"cluster", base.cluster.name},
           {"kernel", base.kernel.name},
           {"gpu", base.cluster.gpu.model},
           {"runs", {{"fitted", fitted_names}, {"held_out", held_names}}},
           {"holdout_fraction", o.holdout},
           {"seed", o.seed},
           {"solver", "projected Levenberg-Marquardt on relative op-time residuals, Eigen ColPivHouseholderQR steps"},
           {"fit", {{"iterations", fit.iterations}, {"observations", fit.observations.size()},
                    {"rms_rel_before", fit.rms_rel_before}, {"rms_rel_after", fit.rms_rel_after},
                    {"rms_log_before", fit.rms_log_before}, {"rms_log_after", fit.rms_log_after},
                    {"rerouted", fit.rerouted}}},
           {"parameters", params},
           {"residuals_by_kind", kinds_json(fit_kinds)},
           {"fitted_runs", steps_json(in_sample)},
           {"holdout", holdout ? steps_json(*holdout) : json(nullptr)},
           {"cluster_out", o.out},
           {"kernel_out", kernel_out},
           {"residuals_out", o.residuals.empty() ? json(nullptr) : json(o.residuals)}};
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }
  std::string text = fmt::format(
      "calibrated {} (GPU {}, kernel {}) from {} run(s), {} observations; {} held out (--holdout {}, seed {})\n"
      "fit: {} iterations, RMS of log(model / measured) {:.3f} -> {:.3f} (relative RMS {:.1f}% -> {:.1f}%)\n\n",
      base.cluster.name, base.cluster.gpu.model, base.kernel.name, fit_runs.size(), fit.observations.size(),
      held_runs.size(), o.holdout, o.seed, fit.iterations, fit.rms_log_before, fit.rms_log_after, 100 * fit.rms_rel_before,
      100 * fit.rms_rel_after);
  Table t({"parameter", "base", "fitted", "std error", "rows", "note"});
  int unexercised = 0;
  for (const auto& p : fit.params) {
    if (!p.exercised && !p.scaled) {
      ++unexercised;
      continue;
    }
    t.row({p.name, fmt::format("{:.6g}", p.base), fmt::format("{:.6g}", p.fitted),  // scaled points show too
           std::isfinite(p.std_error) ? fmt::format("{:.3g}", p.std_error) : "-", std::to_string(p.rows), note(p)});
  }
  text += t.str();
  if (unexercised > 0) {
    text += fmt::format("{} parameter(s) no op exercises stay as they were:", unexercised);
    for (const auto& p : fit.params)
      if (!p.exercised && !p.scaled) text += " " + p.name;
    text += "\n";
  }
  if (fit.rerouted > 0)
    text += fmt::format("note: the fitted latencies route {} observed transfer(s) another way than the base cluster did; "
                        "simulating with the result prices those routes\n",
                        fit.rerouted);
  text += "\nresiduals per op kind (fitted runs)\n" + kinds_text(fit_kinds);
  text += "\nfitted runs (in sample)\n" + steps_text(in_sample);
  if (holdout) {
    text += "\nheld-out runs\n" + steps_text(*holdout);
    text += "\nper op kind (held-out runs)\n" + kinds_text(holdout->kinds);
  }
  text += fmt::format("\nwrote {} and {}{}\nuse: ringmaster simulate ... --set cluster={} --set kernel.attention={}\n", o.out,
                      kernel_out, o.residuals.empty() ? "" : " and " + o.residuals, o.out, kernel_out);
  traces::write_standard_output(text);
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Fit a cluster's cost-model parameters to measured Timelines; --holdout validates on runs not fitted");
  cmd->add_option("--run", o->runs, "SCHEDULE=MEASURED: a Schedule file and the Timeline ringmaster-run measured for it (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--runs", o->runs_dir, "A folder of NAME.schedule.json[.gz] + NAME.measured.json[.gz] pairs");
  cmd->add_option("--cluster", o->cluster, "The cluster to calibrate (name or .json; default: the first run's)");
  add_output_option(cmd, "--out", o->out, "Write the calibrated cluster JSON here")->required();
  add_output_option(cmd, "--kernel-out", o->kernel_out, "Write the calibrated attention kernel JSON here (default: OUT with .kernel.json)");
  add_output_option(cmd, "--residuals", o->residuals, "Write each observation's measured and modelled seconds as CSV");
  cmd->add_option("--holdout", o->holdout, "Hold out this fraction of the runs and report the error on them")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the held-out split")->capture_default_str();
  cmd->add_option("--configs", o->config_dirs, "Folder searched for configs before the embedded ones (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", o->json, "Print JSON for machines instead of tables");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
