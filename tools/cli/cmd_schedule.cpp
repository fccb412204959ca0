// `ringmaster schedule`: generate the Schedule of an experiment and write it
// (the contract the engines and the runtime execute), with a summary.
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/parallel_for.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/generate/index_building.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

struct Options {
  ExperimentOptions exp;
  std::string out;
};

void run(const Options& o) {
  const Experiment e = o.exp.load();
  generate::check_index_layout(e);  // a Schedule the runtime could not execute is not written
  generate::check_fits(generate::estimate_footprint(e, generate::RunKind::schedule), "this schedule");
  ProgressLine progress(!o.exp.json);
  progress.update("building the sparsity pattern", 0, 3);
  pipeline::Session session;
  session.set_threads(default_threads());
  session.patterns(e);
  progress.update("generating the schedule", 1, 3);
  const schedule::Schedule s = session.schedule(e);
  if (!o.out.empty()) {
    progress.update("writing " + o.out, 2, 3);
    schedule::write_schedule(s, o.out);
  }
  std::map<std::string, int64_t> kinds;
  int64_t bytes = 0;
  double flops = 0;
  for (const auto& op : s.ops) {
    ++kinds[std::string(schedule::to_string(op.kind))];
    if (op.kind == schedule::OpKind::send) bytes += s.desc(op).bytes;
    flops += s.desc(op).flops;
  }
  if (o.exp.json) {
    nlohmann::json j{{"experiment", summary_json(e)}, {"generator", s.generator}, {"ranks", s.ranks.size()},
                     {"groups", s.groups.size()}, {"buffers", s.buffers.size()}, {"ops", s.ops.size()}, {"ops_by_kind", kinds},
                     {"p2p_bytes", bytes}, {"flops", flops}};
    if (!o.out.empty()) j["file"] = o.out;
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }
  std::string text = experiment_header(e);
  text += fmt::format("schedule {}: {} ranks, {} groups, {} buffers, {} ops\n", s.generator, s.ranks.size(),
                      s.groups.size(), s.buffers.size(), s.ops.size());
  Table t({"op kind", "count"});
  for (const auto& [k, n] : kinds) t.row({k, std::to_string(n)});
  text += t.str();
  text += fmt::format("point-to-point bytes {:.3f} GB, compute {:.4g} TFLOP\n", double(bytes) / 1e9, flops / 1e12);
  if (!o.out.empty()) text += fmt::format("written to {}\n", o.out);
  traces::write_standard_output(text);
}

}  // namespace

void register_schedule(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("schedule", "Generate the Schedule of an experiment and write it to a file");
  add_experiment_options(cmd, o->exp);
  add_output_option(cmd, "--out,-o", o->out, "Write the Schedule here (JSON; gzipped when the name ends in .gz)");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
