// `ringmaster simulate`: one training step (or the scope the experiment
// selects) through an engine — step time, tokens/s, MFU, per-rank breakdown,
// imbalance and critical path — and optionally the predicted Timeline as a
// Chrome trace that Perfetto opens.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/parallel_for.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/generate.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/pipeline/stream_choice.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "sim/search/evaluate.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"
#include "tools/cli/allocator_tuning.hpp"
#include "tools/cli/emit_option.hpp"

namespace rm::cli {

namespace {

struct Options {
  ExperimentOptions exp;
  std::string engine = "analytic";
  std::string trace;
  std::string schedule_file;
  std::string symmetry = "off";
  std::string stream = "auto";
  int threads = 0;  // 0: default_threads()
  EmitOptions emit;
};

// What a streamed run adds to the output.
struct StreamNote {
  bool used = false;
  std::string why;  // why it streamed (auto) or did not
  engine::StreamRun::Stats stats;
};

// The report, as text or JSON: ops and ranks are what was simulated (replica 0's with
// the data-parallel shortcut, one_replica).
void print_report(const Options& o, const Experiment& e, const report::StepReport& rep, const std::string& generator,
                  int64_t ops, int ranks, bool one_replica, const std::string& symmetry_line, const StreamNote& streamed,
                  const std::optional<Emitted>& emitted) {
  if (o.exp.json) {
    nlohmann::json j = report::to_json(rep);
    j["experiment"] = summary_json(e);
    // The --set overrides as given (key -> value, the last one wins): what `ringmaster diff`
    // shows of inputs the experiment summary does not echo (cluster fields, kernel rates).
    nlohmann::json overrides = nlohmann::json::object();
    for (const std::string& set : o.exp.sets)
      if (const size_t eq = set.find('='); eq != std::string::npos) overrides[set.substr(0, eq)] = set.substr(eq + 1);
    j["overrides"] = overrides;
    // What each override replaced, so `diff` against a run without it shows the value it had.
    if (o.schedule_file.empty()) j["override_bases"] = override_bases(o.exp.store(), o.exp.file, o.exp.sets);
    j["engine"] = o.engine;
    j["generator"] = generator;
    j["ops"] = ops;
    if (!symmetry_line.empty())
      j["symmetry"] = {{"replicas_simulated", one_replica ? 1 : e.parallel.dp},
                       {"replicas", e.parallel.dp},
                       {"note", symmetry_line}};
    if (streamed.used)
      j["streamed"] = {{"chunks", streamed.stats.chunks},
                       {"peak_ops_held", streamed.stats.peak_ops_held},
                       {"peak_path_nodes", streamed.stats.peak_path_nodes},
                       {"note", streamed.why}};
    else if (!streamed.why.empty())
      j["streamed"] = {{"chunks", 0}, {"note", streamed.why}};
    if (!o.trace.empty()) j["trace"] = o.trace;
    if (emitted) j["emit"] = emitted_json(o.emit, *emitted);
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }
  std::string text = experiment_header(e);
  text += fmt::format("schedule {}: {} ops over {} ranks; engine {}\n\n", generator, ops, ranks, o.engine);
  if (!symmetry_line.empty()) text += "symmetry: " + symmetry_line + "\n\n";
  if (streamed.used)
    text += fmt::format("streamed: generated and simulated in {} chunks, at most {} ops held at once ({})\n\n",
                        streamed.stats.chunks, streamed.stats.peak_ops_held, streamed.why);
  else if (!streamed.why.empty())
    text += "streamed: no: " + streamed.why + "\n\n";
  text += report::to_text(rep);
  if (!o.trace.empty()) text += fmt::format("\nTimeline written to {} (open it in https://ui.perfetto.dev)\n", o.trace);
  if (emitted) text += emitted_text(o.emit, *emitted);
  traces::write_standard_output(text);
}

void run(const Options& o) {
  keep_freed_memory();
  one_heap_for_all_threads();
  const auto kind = engine::parse_engine_kind(o.engine);
  if (!kind) throw ConfigError(fmt::format("--engine: expected analytic or simgrid, got \"{}\"", o.engine));
  if (!o.schedule_file.empty() && (!o.exp.file.empty() || !o.exp.sets.empty()))
    throw ConfigError("--schedule: a schedule carries its experiment; give no experiment or --set with it");

  if (o.symmetry != "off" && o.symmetry != "dp")
    throw ConfigError(fmt::format("--symmetry: expected off or dp, got \"{}\"", o.symmetry));
  if (o.symmetry == "dp" && !o.schedule_file.empty())
    throw ConfigError("--symmetry dp: a Schedule file holds every replica; give an experiment instead");
  if (o.stream != "auto" && o.stream != "on" && o.stream != "off")
    throw ConfigError(fmt::format("--stream: expected auto, on or off, got \"{}\"", o.stream));
  if (o.threads < 0) throw ConfigError(fmt::format("--threads: expected 0 (up to 8 cores) or more, got {}", o.threads));
  const int threads = o.threads > 0 ? o.threads : default_threads();
  const auto emit_to = emit_framework(o.emit);
  // The layout handed over (--emit), after its step is known: a Schedule file's experiment too.
  auto emit_for = [&](const Experiment& ex, const report::StepReport& rep) -> std::optional<Emitted> {
    if (!emit_to) return std::nullopt;
    double analytic_s = rep.step_time_s;
    if (*kind != engine::EngineKind::analytic) {  // the nearest layout is predicted by the analytic engine: compare like with like
      search::EvaluateOptions analytic;
      analytic.bound_by = false;
      pipeline::Session again;
      const search::Outcome own = search::evaluate_one(ex, analytic, again);
      if (own.ok) analytic_s = own.report.step_time_s;
    }
    return emit_layout(o.emit, *emit_to, ex, o.exp.store(), analytic_s);
  };
  if (o.stream == "on") {  // what a streamed run cannot give
    if (!o.schedule_file.empty()) throw ConfigError("--stream on: a Schedule file is read whole; give an experiment instead");
    if (!o.trace.empty()) throw ConfigError("--stream on: a streamed run keeps no Timeline to write (--trace)");
    if (*kind != engine::EngineKind::analytic) throw ConfigError("--stream on: only the analytic engine streams");
  }
  const bool can_stream = o.schedule_file.empty() && o.trace.empty() && *kind == engine::EngineKind::analytic;
  StreamNote streamed;
  std::string symmetry_line;  // what the shortcut did, when asked for
  ProgressLine progress(!o.exp.json);
  Experiment e;
  schedule::Schedule in;
  if (!o.schedule_file.empty()) {
    progress.update("reading " + o.schedule_file, 0, 3);
    auto loaded = pipeline::load_schedule_file(o.schedule_file, o.exp.store());
    e = std::move(loaded.experiment);
    in = std::move(loaded.schedule);
  } else {
    e = o.exp.load();
    pipeline::Session session;
    session.set_threads(threads);
    bool one = false;
    // What the shortcut did, when asked for (why_not: why it did not apply).
    auto symmetry_note = [&](bool applied, const std::string& why_not) -> std::string {
      if (o.symmetry != "dp") return "";
      return applied ? fmt::format("simulated 1 of {} data-parallel replicas (exact: their routes are translates)",
                                   e.parallel.dp)
                     : "the full step: the data-parallel shortcut does not apply: " + why_not;
    };
    const bool try_one = o.symmetry == "dp" && (symmetry_line = generate::replica_refusal(e, session.topology(e))).empty();
    // Streaming (docs/engines.md, "Streaming"): asked for, or (auto) wherever it can
    // run and fits; the whole step is built only for --trace, SimGrid or --stream off,
    // or where the streamed run falls back to it (pipeline::choose_and_stream).
    const pipeline::StreamFacts facts = pipeline::stream_facts(e, try_one);
    const auto when = o.stream == "on"                ? pipeline::StreamWhen::always
                      : o.stream == "auto" && can_stream ? pipeline::StreamWhen::preferred
                                                         : pipeline::StreamWhen::never;
    if (o.stream == "auto" && !can_stream && facts.whole.bytes > facts.have && facts.window.bytes <= facts.have)
      throw ConfigError(fmt::format("this simulation needs ~{:.1f} GB ({} ops), this machine has {:.1f} GB; a streamed "
                                    "run (--stream on) would need ~{:.1f} GB but takes no --trace, no --schedule and "
                                    "only the analytic engine",
                                    double(facts.whole.bytes) / 1e9, facts.whole.ops, double(facts.have) / 1e9,
                                    double(facts.window.bytes) / 1e9));
    std::optional<PointProgress> bar;
    pipeline::StreamProgress shown;
    shown.starting = [&](bool) {
      bar.reset();  // a second try (without the shortcut) counts a new total
      progress.update("building the sparsity pattern, then generating and simulating, streamed", 1, 3);
    };
    shown.ops = [&](int64_t ops, int64_t total) {
      if (!bar) bar.emplace("streamed: generated and simulated", !o.exp.json, std::chrono::seconds(10), "ops");
      bar->update(ops, total);
    };
    pipeline::StreamChoice choice = pipeline::stream_step(session, e, when, try_one, facts, shown);
    bar.reset();
    streamed.why = choice.note;
    if (!choice.shortcut_left.empty()) symmetry_line = choice.shortcut_left;
    if (choice.run) {
      streamed.used = true;
      streamed.stats = choice.run->stats;
      symmetry_line = symmetry_note(choice.one_replica, symmetry_line);
      print_report(o, e, choice.run->report, choice.run->generator, choice.run->stats.ops, choice.run->ranks,
                   choice.one_replica, symmetry_line, streamed, emit_for(e, choice.run->report));
      return;
    }
    if (try_one) {  // the data-parallel shortcut (docs/engines.md, "Replica symmetry")
      generate::check_fits(facts.whole, "this simulation");
      progress.update("building the sparsity pattern", 0, 3);
      session.patterns(e);
      progress.update("generating one replica's schedule", 1, 3);
      if (auto s1 = session.one_replica_schedule(e, symmetry_line)) in = std::move(*s1), one = true;
    }
    symmetry_line = symmetry_note(one, symmetry_line);
    if (!one) {
      generate::check_fits(facts.whole_full, "this simulation");
      progress.update("building the sparsity pattern", 0, 3);
      session.patterns(e);
      progress.update("generating the schedule", 1, 3);
      // A written trace carries the Schedule's hash (below): only then the whole Schedule.
      in = session.schedule(e, o.trace.empty() ? generate::Accesses::none : generate::Accesses::all);
    }
  }
  progress.update(fmt::format("simulating {} ops ({})", in.ops.size(), o.engine), 2, 3);
  // The Timeline is built only to be written: the report is the same without it.
  pipeline::Simulation sim = pipeline::simulate_schedule(
      e, std::move(in), *kind, o.trace.empty() ? pipeline::WithTimeline::no : pipeline::WithTimeline::yes, threads);
  const schedule::Schedule& s = sim.schedule;
  const report::StepReport& rep = sim.report;
  if (!o.schedule_file.empty()) pipeline::check_report_plausible(rep, o.schedule_file);
  if (!o.trace.empty()) {
    progress.update("writing " + o.trace, 3, 3);
    // The hash ringmaster-run records, so `ringmaster compare` can tell that a
    // predicted and a measured Timeline are of one Schedule.
    // One replica's Schedule is never written to a file: it has no hash to match.
    if (s.symmetry.replicas == 1) sim.timeline.metadata["schedule_hash"] = schedule::schedule_hash(s);
    traces::write_chrome_trace(sim.timeline, o.trace);
  }
  print_report(o, e, rep, s.generator, int64_t(s.ops.size()), int(s.ranks.size()), s.symmetry.replicas > 1,
               symmetry_line, streamed, emit_for(e, rep));
}
}  // namespace

void register_simulate(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict one training step: time, MFU, breakdown, imbalance, critical path, what bounds it, memory per GPU");
  add_experiment_options(cmd, o->exp);
  cmd->add_option("--engine", o->engine, "analytic (fast list scheduler) or simgrid (flow-level contention)")
      ->capture_default_str();
  add_output_option(cmd, "--trace", o->trace, "Write the predicted Timeline as Chrome-trace JSON (.gz to compress)");
  cmd->add_option("--schedule", o->schedule_file, "Simulate this Schedule file (from `ringmaster schedule`) instead");
  add_emit_options(cmd, o->emit, "this layout");
  cmd->add_option("--symmetry", o->symmetry,
                  "dp: simulate one data-parallel replica for all when that is provably exact (either engine), "
                  "else the full step with a line saying why")
      ->capture_default_str();
  cmd->add_option("--stream", o->stream,
                  "on: generate and simulate the step a piece at a time, holding only the ops in flight (analytic "
                  "engine; every figure the whole run's, bound-by and critical path included); auto: wherever it "
                  "can (no --trace, no --schedule, the analytic engine) and fits in memory; off: never")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "Threads for one simulation: the per-head pattern work, the report beside the analytic engine, "
                  "a streamed run's generator and report beside its engine; 0 = the machine's cores, up to 8 "
                  "(the answer is the same on any count)")
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
