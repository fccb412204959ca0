// `ringmaster replay TRACE...`: trace-driven simulation of recorded PyTorch
// profiler (Kineto) traces, one file per rank. Compute keeps its recorded
// durations, NCCL calls are re-simulated on the cluster, CPU gaps are kept as
// recorded up to each synchronisation; every recorded ProfilerStep is timed
// again. With `--set cluster.KEY=V` what-ifs it predicts the change.
// A table by default, --json for machines. docs/replay.md.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/replay/replay.hpp"
#include "sim/replay/replay_cluster.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/kineto.hpp"
#include "traces/trace_error.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

using nlohmann::json;

struct Options {
  std::vector<std::string> traces;
  std::string cluster;
  std::vector<std::string> sets;
  std::vector<std::string> config_dirs;
  std::string engine = "analytic";
  std::string trace;
  bool json = false;
};

// The first GPU's name in a Kineto file's deviceProperties (written before
// traceEvents, so only the file's head is read); empty when none.
std::string recorded_gpu_name(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) return "";
  std::string head(1 << 16, '\0');
  const int n = gzread(f, head.data(), static_cast<unsigned>(head.size()));
  gzclose(f);
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const size_t dev = head.find("\"deviceProperties\"");
  if (dev == std::string::npos) return "";
  const size_t key = head.find("\"name\"", dev);
  if (key == std::string::npos) return "";
  const size_t open = head.find('"', head.find(':', key) + 1);
  const size_t close = open == std::string::npos ? open : head.find('"', open + 1);
  if (close == std::string::npos) return "";
  return head.substr(open + 1, close - open - 1);
}

// GPUs the cluster must have: rank r runs on GPU r (members of recorded groups too).
int gpus_needed(const traces::KinetoImport& imp) {
  int n = 1;
  for (const auto& r : imp.ranks) n = std::max(n, r.rank + 1);
  for (const auto& [op, c] : imp.collectives)
    for (int m : c.group_ranks) n = std::max(n, m + 1);
  return n;
}

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }
std::string pct(double rec, double rep) { return rec > 0 ? fmt::format("{:+.2f}%", 100 * (rep / rec - 1)) : "-"; }

void run(const Options& o) {
  const auto kind = engine::parse_engine_kind(o.engine);
  if (!kind) throw ConfigError(fmt::format("--engine: expected analytic or simgrid, got \"{}\"", o.engine));
  const ConfigStore store(o.config_dirs);
  ProgressLine progress(!o.json);

  progress.update("reading the traces", 0, 3);
  traces::KinetoImport imp;
  try {
    imp = traces::read_kineto(o.traces);
  } catch (const traces::TraceError& e) {
    throw ConfigError(e.what());  // names the file and the event
  }

  std::string cluster = o.cluster;
  if (cluster.empty()) {
    const std::string gpu = recorded_gpu_name(o.traces.front());
    cluster = replay::default_cluster(store, gpu, gpus_needed(imp));
    if (cluster.empty())
      throw ConfigError(fmt::format(
          "{}: no --cluster given and no cluster config matches the recorded GPU ({}) with {} GPUs: pass --cluster NAME",
          o.traces.front(), gpu.empty() ? "none recorded" : "\"" + gpu + "\"", gpus_needed(imp)));
  }
  const Cluster base = replay::load_cluster(store, cluster, {});
  const Cluster what_if = replay::load_cluster(store, cluster, o.sets);

  progress.update("building the replay schedule", 1, 3);
  replay::ReplayPlan plan;
  try {
    plan = replay::build_replay(imp, topology::Topology(base), replay::replay_cost_model(base));
  } catch (const schedule::ScheduleError& e) {
    throw ConfigError(fmt::format("{}: the recorded dependencies do not make a runnable schedule: {}",
                                  o.traces.front(), e.what()));
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
  progress.update(fmt::format("replaying {} ops ({})", plan.schedule.ops.size(), o.engine), 2, 3);
  const replay::ReplayResult res =
      replay::run_replay(plan, topology::Topology(what_if), replay::replay_cost_model(what_if), *kind);
  if (!o.trace.empty()) {
    progress.update("writing " + o.trace, 3, 3);
    const auto source = *kind == engine::EngineKind::analytic ? traces::Source::analytic : traces::Source::simgrid;
    traces::write_chrome_trace(replay::replayed_timeline(imp, plan, res, source), o.trace);
  }

  if (o.json) {
    json ranks = json::array();
    for (const auto& r : res.ranks) {
      json steps = json::array();
      for (const auto& st : r.steps)
        steps.push_back({{"name", st.name},
                         {"recorded_s", st.recorded_s},
                         {"replayed_s", st.replayed_s},
                         {"error", st.recorded_s > 0 ? st.replayed_s / st.recorded_s - 1 : 0.0},
                         {"gpu_recorded_s", st.gpu_recorded_s},
                         {"gpu_replayed_s", st.gpu_replayed_s},
                         {"nccl_recorded_s", st.nccl_recorded_s},
                         {"nccl_replayed_s", st.nccl_replayed_s},
                         {"whole_trace", st.whole_trace}});
      ranks.push_back({{"rank", r.rank}, {"steps", steps}});
    }
    json roles = json::object();
    for (replay::OpRole role : plan.role) {
      const std::string k(replay::to_string(role));
      roles[k] = roles.value(k, 0) + 1;
    }
    json fixed = json::object();
    for (const auto& [why, n] : plan.calls.fixed) fixed[why] = n;
    const json out{{"traces", o.traces},
                   {"cluster", cluster},
                   {"overrides", o.sets},
                   {"engine", o.engine},
                   {"ranks", ranks},
                   {"missing_ranks", plan.missing_ranks},
                   {"collectives",
                    {{"resimulated", plan.calls.resimulated},
                     {"missing_members", plan.calls.missing_members},
                     {"slower_than_recorded", plan.calls.slower_than_recorded},
                     {"kept_as_recorded", fixed}}},
                   {"schedule",
                    {{"ops", plan.schedule.ops.size()}, {"ranks", plan.schedule.ranks.size()}, {"ops_by_role", roles}}},
                   {"skipped_events", imp.skipped},
                   {"notes", plan.notes}};
    traces::write_standard_output(out.dump(2) + "\n");
    return;
  }
  std::string text = fmt::format("replay of {} on {}{}; engine {}\n", fmt::join(o.traces, ", "), cluster,
                                 o.sets.empty() ? "" : fmt::format(" with {}", fmt::join(o.sets, " ")), o.engine);
  int64_t kept = 0;
  for (const auto& [why, k] : plan.calls.fixed) kept += k;
  text += fmt::format("{} ops on {} ranks ({} not recorded); NCCL calls: {} re-simulated, {} with unrecorded "
                      "members, {} kept as recorded\n\n",
                      plan.schedule.ops.size(), plan.schedule.ranks.size(), plan.missing_ranks.size(),
                      plan.calls.resimulated, plan.calls.missing_members, kept);
  Table t({"rank", "step", "recorded ms", "replayed ms", "error", "GPU recorded ms", "GPU replayed ms",
           "NCCL recorded ms", "NCCL replayed ms"});
  for (const auto& r : res.ranks)
    for (const auto& st : r.steps)
      t.row({std::to_string(r.rank), st.name, ms(st.recorded_s), ms(st.replayed_s), pct(st.recorded_s, st.replayed_s),
             st.gpu_recorded_s > 0 ? ms(st.gpu_recorded_s) : "-", st.gpu_recorded_s > 0 ? ms(st.gpu_replayed_s) : "-",
             st.nccl_recorded_s > 0 ? ms(st.nccl_recorded_s) : "-", st.nccl_recorded_s > 0 ? ms(st.nccl_replayed_s) : "-"});
  text += t.str();
  if (!plan.notes.empty()) {
    text += "\nnotes:\n";
    for (const auto& n : plan.notes) text += "  " + n + "\n";
  }
  if (!imp.skipped.empty()) {
    int64_t n = 0;
    for (const auto& [k, c] : imp.skipped) n += c;
    text += fmt::format("\n{} trace events not imported (by kind in --json)\n", n);
  }
  traces::write_standard_output(text);
}

}  // namespace

void register_replay(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Trace-driven simulation of PyTorch profiler traces: each recorded ProfilerStep replayed on a cluster");
  cmd->add_option("traces", o->traces, "Kineto trace files (.json or .json.gz), one per rank of one job")->required();
  cmd->add_option("--cluster", o->cluster,
                  "Cluster config (name or .json); default: the one whose GPU matches the trace's deviceProperties");
  cmd->add_option("--set", o->sets, "What-if on the cluster, e.g. cluster.nic.bandwidth_Gbps=400 (repeatable)")
      ->allow_extra_args(false);  // one value per flag: `--set a=1 TRACE` leaves TRACE to the positional
  cmd->add_option("--configs", o->config_dirs, "Folder with clusters/ searched before the embedded configs (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--engine", o->engine, "analytic (fast list scheduler) or simgrid (flow-level contention)")
      ->default_val("analytic");
  add_output_option(cmd, "--trace", o->trace,
                  "Write the replayed GPU events as a Chrome trace (.gz to compress): recorded names and op ids");
  cmd->add_flag("--json", o->json, "Print JSON for machines instead of a table");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
