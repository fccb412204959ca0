// `ringmaster plan`: which layout of the experiment is fastest on its cluster —
// the search of sim/search/plan.hpp (docs/planner.md), the winner, the
// experiment's own layout beside it, and the runners-up with why each lost.
#include <cstdio>
#include <memory>
#include <algorithm>
#include <charconv>
#include <set>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/generate/footprint.hpp"
#include "sim/generate/index_building.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/search/plan.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"
#include "tools/cli/allocator_tuning.hpp"
#include "tools/cli/emit_option.hpp"


namespace rm::cli {

namespace {

struct Options {
  ExperimentOptions exp;
  int gpus = 0;
  int top = 5;
  std::string confirm = "simgrid";
  int jobs = 0;
  std::vector<std::string> fix;
  std::vector<int64_t> stripe_tokens;
  bool exhaustive = false;
  bool no_screen = false;
  std::string export_file;
  std::string symmetry = "auto";
  std::string extrapolate = "auto";
  std::string screen_budget = "auto";
  EmitOptions emit;
};

nlohmann::json candidate_json(const search::PlanCandidate& c, const Experiment& base) {
  const Experiment e = search::apply_layout(base, c.layout);
  nlohmann::json j = {{"config", summary_json(e)["parallel"]},
                      {"label", search::layout_label(c.layout)},
                      {"step_time_s", c.step_time_s()},
                      {"engine", c.confirmed && c.simgrid.ok ? "simgrid" : "analytic"},
                      {"analytic_step_time_s", c.analytic.report.step_time_s},
                      {"tokens_per_s", c.tokens / c.step_time_s()},
                      {"mfu", c.analytic.report.mfu * c.analytic.report.step_time_s / c.step_time_s()},
                      {"compute_floor_s", c.floor.total()},
                      {"imbalance_worker", c.analytic.report.imbalance.worker},
                      {"exposed_comm_s", c.analytic.report.breakdown.mean.exposed_comm_s},
                      {"generator", c.analytic.generator}};
  if (c.confirmed && c.simgrid.ok) j["simgrid_step_time_s"] = c.simgrid.report.step_time_s;
  j["memory_GB"] = c.memory.peak_GB;
  j["oom"] = c.memory.oom;
  if (!c.reason.empty()) j["reason"] = c.reason;
  // Keys only where they apply, so a plan that needs neither prints what it did before.
  if (!c.analytic.estimated.empty()) j["estimated"] = c.analytic.estimated;
  if (c.analytic.one_replica) j["one_replica"] = true;
  if (c.analytic.streamed) j["streamed"] = true;
  if (!c.simgrid_skipped.empty()) j["simgrid_skipped"] = c.simgrid_skipped;
  const report::StepReport& shown = c.confirmed && c.simgrid.ok ? c.simgrid.report : c.analytic.report;
  if (shown.bound_by) j["bound_by"] = report::brief(*shown.bound_by);
  j["equivalents"] = nlohmann::json::array();
  for (const auto& l : c.equivalents) j["equivalents"].push_back(search::layout_label(l));
  return j;
}

// A step figure, marked "*" where it is estimated rather than simulated.
std::string step_cell(const search::PlanCandidate& c, double s) {
  return fmt::format("{:.4g}{}", s, c.analytic.estimated.empty() ? "" : "*");
}

std::string memory_cell(const search::PlanCandidate& c) {
  return fmt::format("{:.1f}", c.memory.peak_GB);
}

// The experiment to plan. Planning it on another cluster (--set cluster=...) is
// the common case, and its own layout may not fit there: then the layout keys
// the user did not set restart from one GPU, the seed becomes that layout, and
// the search covers the new cluster as usual. Any other error stands.
Experiment load_base(const ExperimentOptions& exp, const ConfigStore& store, bool& reset) {
  try {
    return exp.load();
  } catch (const ConfigError& first) {
    std::vector<std::string> sets;
    auto user_set = [&](const std::string& key) {
      return std::any_of(exp.sets.begin(), exp.sets.end(),
                         [&](const std::string& s) { return s.substr(0, s.find('=')) == key; });
    };
    for (const char* kv : {"parallel.dp=1", "parallel.tp=1", "parallel.hp=1", "parallel.cp=1", "parallel.ring=ring",
                           "parallel.window=1", "parallel.placement=head_first", "parallel.ring_order=rank"}) {
      const std::string key = std::string(kv).substr(0, std::string(kv).find('='));
      if (!user_set(key)) sets.push_back(kv);
    }
    sets.insert(sets.end(), exp.sets.begin(), exp.sets.end());
    try {
      Experiment e = load_experiment(store, exp.file, sets);
      reset = true;
      return e;
    } catch (const ConfigError&) {
      throw first;  // not a layout that does not fit: the user's error as it was
    }
  }
}

void run(const Options& o) {
  keep_freed_memory();  // the search runs hundreds of simulations back to back
  if (o.confirm != "simgrid" && o.confirm != "none")
    throw ConfigError(fmt::format("--engine-confirm: expected simgrid or none, got \"{}\"", o.confirm));
  if (o.top < 1) throw ConfigError(fmt::format("--top: expected at least 1, got {}", o.top));
  if (o.symmetry != "auto" && o.symmetry != "off")
    throw ConfigError(fmt::format("--symmetry: expected auto or off, got \"{}\"", o.symmetry));
  if (o.extrapolate != "auto" && o.extrapolate != "off")
    throw ConfigError(fmt::format("--extrapolate: expected auto or off, got \"{}\"", o.extrapolate));
  const std::vector<std::string>& keys = search::searched_keys();
  auto searched = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  search::PlanOptions po;
  for (const std::string& k : o.fix) {
    if (!searched(k))
      throw ConfigError(fmt::format("--fix {}: not a key the planner searches (expected one of {})", k,
                                    fmt::join(keys, ", ")));
    po.space.fixed.insert(k);
  }
  // A searched key the user sets is fixed at that value.
  for (const std::string& s : o.exp.sets) {
    const std::string k = s.substr(0, s.find('='));
    if (searched(k)) po.space.fixed.insert(k);
  }
  const ConfigStore store = o.exp.store();
  bool seed_reset = false;
  const Experiment base = load_base(o.exp, store, seed_reset);
  if (o.gpus < 0 || o.gpus > base.cluster.gpus())
    throw ConfigError(fmt::format("--gpus: expected 1 to the {} GPUs of cluster {}, got {}", base.cluster.gpus(),
                                  base.cluster.name, o.gpus));
  po.space.gpus = o.gpus;
  if (!o.stripe_tokens.empty()) po.space.stripe_tokens = o.stripe_tokens;
  po.top_k = o.top;
  po.confirm_simgrid = o.confirm == "simgrid";
  po.jobs = o.jobs;
  po.prune = !o.exhaustive;
  if (o.symmetry == "off") po.symmetry_above_ops = -1;
  if (o.extrapolate == "off") po.extrapolate_above_ops = -1;
  if (o.screen_budget == "auto") {
    po.screen_budget = search::auto_screen_budget(o.gpus > 0 ? o.gpus : base.cluster.gpus());
  } else {
    int64_t n = -1;
    const char* end = o.screen_budget.data() + o.screen_budget.size();
    const auto [at, err] = std::from_chars(o.screen_budget.data(), end, n);
    if (err != std::errc() || at != end || n < 0)
      throw ConfigError(fmt::format("--screen-budget: expected auto, 0 (no limit) or more, got \"{}\"", o.screen_budget));
    po.screen_budget = n;
  }
  po.screen = !o.exhaustive && !o.no_screen;
  ProgressLine line(!o.exp.json);
  po.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    line.update(stage, int(done), int(std::max<int64_t>(total, 1)));
  };
  const auto emit_to = emit_framework(o.emit);  // an unknown framework before the search
  const search::PlanResult r = search::plan(base, store, po);
  const search::PlanCandidate& best = r.ranked.front();
  const Experiment winner = search::apply_layout(base, best.layout);
  std::optional<Emitted> emitted;
  if (emit_to) {
    line.update("emitting the winner for " + o.emit.framework, 0, 1);
    emitted = emit_layout(o.emit, *emit_to, winner, store, best.analytic.report.step_time_s);
  }

  if (!o.export_file.empty()) {
    line.update("writing " + o.export_file, 0, 1);
    generate::check_fits(generate::estimate_footprint(winner, generate::RunKind::schedule), "the winner's schedule");
    generate::check_index_layout(winner);
    pipeline::Session session;
    schedule::write_schedule(session.schedule(winner), o.export_file);
  }
  const search::PlanStats& st = r.stats;
  if (o.exp.json) {
    nlohmann::json j;
    j["best"] = candidate_json(best, base);
    j["candidates"] = nlohmann::json::array();
    for (const auto& c : r.ranked) j["candidates"].push_back(candidate_json(c, base));
    if (r.seed.analytic.ok) {
      j["seed"] = candidate_json(r.seed, base);
      j["seed"]["in_space"] = r.seed_in_space;
      j["seed"]["reset_to_one_gpu"] = seed_reset;
    }
    j["search"] = {{"gpus", st.gpus},
                   {"enumerated", st.enumerated},
                   {"invalid", st.invalid},
                   {"out_of_memory", st.oom},
                   {"screen_layer_simulations", st.screened},
                   {"screen_layers", st.screen_points},
                   {"screen_pruned_by_bound", st.screen_pruned},
                   {"screened_out", st.screened_out},
                   {"pruned_by_bound", st.pruned_bound},
                   {"simulated", st.simulated},
                   {"failed", st.failed},
                   {"confirmed_simgrid", st.confirmed}};
    if (st.oom > 0) j["search"]["smallest_shortfall_GB"] = st.smallest_shortfall_GB;
    if (st.estimated > 0) j["search"]["estimated_steps"] = st.estimated;
    if (st.screen_too_large > 0) j["search"]["screen_too_large"] = st.screen_too_large;
    if (st.screen_budget_hit) j["search"]["screen_budget_hit"] = true;
    j["search"]["screen_budget"] = po.screen_budget;  // 0: no limit
    if (st.one_replica > 0) j["search"]["one_replica_simulations"] = st.one_replica;
    if (st.streamed > 0) j["search"]["streamed_simulations"] = st.streamed;
    if (st.pruned_comm > 0) j["search"]["pruned_by_ring_floor"] = st.pruned_comm;
    if (st.screen_pruned_comm > 0) j["search"]["screen_pruned_by_ring_floor"] = st.screen_pruned_comm;
    j["experiment"] = summary_json(base);
    if (!o.export_file.empty()) j["export"] = o.export_file;
    if (emitted) j["emit"] = emitted_json(o.emit, *emitted);
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }
  std::string text = experiment_header(base);
  text += fmt::format(
      "searched {} layouts of {} GPUs: {} invalid, {} out of memory, {}{} skipped by the compute floor, {} full "
      "steps simulated (analytic){}{}\n\n",
      st.enumerated, st.gpus, st.invalid, st.oom,
      st.screened > 0 ? fmt::format("{} left out by a one-layer screen ({} layer simulations), ", st.screened_out,
                                    st.screened)
                      : "",
      st.pruned_bound, st.simulated, st.confirmed > 0 ? fmt::format(", {} re-simulated with SimGrid", st.confirmed) : "",
      st.failed > 0 ? fmt::format(", {} could not run: {}", st.failed, st.first_failure) : "");
  if (st.pruned_comm > 0 || st.screen_pruned_comm > 0)
    text += fmt::format("the ring-transfer floor skipped {} full steps and {} screen layers that the compute floor "
                        "alone would have simulated\n",
                        st.pruned_comm, st.screen_pruned_comm);
  if (st.screen_too_large > 0)
    text += fmt::format("{} layers were not screened: one-layer simulations above {} ops (not kept)\n",
                        st.screen_too_large, po.screen_max_ops);
  if (st.screen_budget_hit)
    text += fmt::format("the screen stopped at its budget of {} layer simulations (--screen-budget{}): the layouts "
                        "with the lowest floors were screened, not all that the floor could not rule out\n",
                        po.screen_budget,
                        o.screen_budget == "auto" ? " auto, for a plan of more than 1,024 GPUs; 0 lifts it" : "");
  if (st.one_replica > 0)
    text += fmt::format("{} simulations ran one data-parallel replica for all (exact: --symmetry)\n", st.one_replica);
  if (st.streamed > 0)
    text += fmt::format("{} simulations were streamed: too large to hold whole in this machine's memory\n",
                        st.streamed);
  if (st.estimated > 0)
    text += fmt::format("{} full steps too large to simulate whole were estimated from steps of 1 and up to 4 layers "
                        "(marked *; --extrapolate off streams them where that fits, else refuses them)\n",
                        st.estimated);
  if (st.pruned_comm > 0 || st.screen_pruned_comm > 0 || st.one_replica > 0 || st.streamed > 0 || st.estimated > 0 ||
      st.screen_too_large > 0 || st.screen_budget_hit)
    text += "\n";
  const char* eng = best.confirmed && best.simgrid.ok ? "simgrid" : "analytic";
  text += fmt::format("winner  {}\n", search::layout_label(best.layout));
  text += fmt::format("        step {} s ({}{}), {:.0f} tokens/s, MFU {:.1f}%, memory {} GB\n",
                      step_cell(best, best.step_time_s()), eng, best.analytic.estimated.empty() ? "" : ", estimated",
                      best.tokens / best.step_time_s(),
                      100 * best.analytic.report.mfu * best.analytic.report.step_time_s / best.step_time_s(),
                      memory_cell(best));
  {
    const report::StepReport& shown = best.confirmed && best.simgrid.ok ? best.simgrid.report : best.analytic.report;
    if (shown.bound_by) text += fmt::format("        bound by: {}\n", report::brief(*shown.bound_by));
    if (!best.analytic.estimated.empty()) text += fmt::format("        estimated: {}\n", best.analytic.estimated);
    if (!best.simgrid_skipped.empty()) text += fmt::format("        {}\n", best.simgrid_skipped);
  }
  if (r.seed.analytic.ok) {
    text += fmt::format("seed    {} ({})\n", search::layout_label(r.seed.layout),
                        seed_reset ? "the experiment's own layout does not fit this cluster: one GPU instead"
                                   : "the experiment's own layout");
    text += fmt::format("        step {:.4g} s ({}), memory {} GB{}{}\n", r.seed.step_time_s(),
                        r.seed.confirmed && r.seed.simgrid.ok ? "simgrid" : "analytic", memory_cell(r.seed),
                        r.seed.memory.oom ? fmt::format(" (OUT OF MEMORY: {:.1f} GB more than the GPU's {:.0f})",
                                                        r.seed.memory.shortfall_GB(), r.seed.memory.capacity_GB)
                                          : "",
                        r.seed.reason.empty() ? ": the winner" : "; " + r.seed.reason);
  }
  text += "\n";
  Table t({"#", "layout", "step s", "analytic s", "tokens/s", "MFU", "mem GB", "why it lost"});
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& c = r.ranked[i];
    const std::string same = c.equivalents.empty() ? "" : fmt::format(" (+{} equivalent)", c.equivalents.size());
    t.row({std::to_string(i + 1), search::layout_label(c.layout) + same, step_cell(c, c.step_time_s()),
           step_cell(c, c.analytic.report.step_time_s), fmt::format("{:.0f}", c.tokens / c.step_time_s()),
           fmt::format("{:.1f}%", 100 * c.analytic.report.mfu * c.analytic.report.step_time_s / c.step_time_s()),
           memory_cell(c), i == 0 ? "winner" : c.reason});
  }
  text += t.str();
  if (std::any_of(r.ranked.begin(), r.ranked.end(), [](const auto& c) { return !c.analytic.estimated.empty(); }))
    text += "* estimated from steps of 1 and up to 4 layers of the layout (docs/planner.md), not simulated whole\n";
  if (!o.export_file.empty()) text += fmt::format("\nthe winner's Schedule written to {}\n", o.export_file);
  if (emitted) text += emitted_text(o.emit, *emitted);
  traces::write_standard_output(text);
}

}  // namespace

void register_plan(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Find the fastest layout (dp x tp x hp x cp, partition, ring, placement, checkpoint, ZeRO) that fits");
  add_experiment_options(cmd, o->exp);
  cmd->add_option("--gpus", o->gpus, "GPUs to lay out (default: the cluster's)");
  cmd->add_option("--top", o->top, "Runners-up kept and re-simulated with SimGrid")->capture_default_str();
  cmd->add_option("--engine-confirm", o->confirm, "simgrid (re-simulate the top K) or none")->capture_default_str();
  cmd->add_option("--jobs", o->jobs, "Worker threads for the analytic ranking (default: every core)");
  cmd->add_option("--fix", o->fix, "Keep this key at the experiment's value (repeatable), e.g. parallel.ring; "
                                   "a searched key given to --set is fixed too")
      ->allow_extra_args(false);
  cmd->add_option("--stripe-tokens", o->stripe_tokens, "Stripe widths tried for stripe and balanced partitions, e.g. 128,1024")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_flag("--exhaustive", o->exhaustive,
                "Simulate a full step of every layout that fits: no pruning by the compute floor, no layer screen");
  cmd->add_flag("--no-screen", o->no_screen,
                "Rank full steps only (exact under the compute floor), without first screening one layer of each layout");
  add_output_option(cmd, "--export", o->export_file, "Write the winner's Schedule (.json or .json.gz)");
  add_emit_options(cmd, o->emit, "the winner");
  cmd->add_option("--screen-budget", o->screen_budget,
                  "At most N one-layer simulations in the screen, lowest floors first (0: no limit); "
                  "auto: no limit up to 1,024 GPUs, 64 above")
      ->capture_default_str();
  cmd->add_option("--symmetry", o->symmetry,
                  "auto: simulate one data-parallel replica for all where exact, for steps above 1M ops; off: never")
      ->capture_default_str();
  cmd->add_option("--extrapolate", o->extrapolate,
                  "auto: estimate steps above 8M ops (after --symmetry) from steps of 1 and up to 4 layers; off: simulate "
                  "them whole, or streamed where only that fits in memory, or fail")
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
