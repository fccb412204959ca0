// `ringmaster imbalance`: worker- and step-level attention imbalance of every
// applicable token partition for one experiment, per layer and in total.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/parallel_for.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/placement/attention_kind.hpp"
#include "traces/text_file.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

using report::ImbalanceReport;
using report::LayerImbalance;
using report::PartitionImbalance;

struct Options {
  ExperimentOptions exp;
  std::string csv;
  std::vector<std::string> partitions;
  bool per_layer = false;
};

nlohmann::json to_json(const LayerImbalance& l) {
  return {{"worker_imbalance", l.worker},       {"step_imbalance", l.step},
          {"worker_imbalance_nnz", l.worker_nnz}, {"step_imbalance_nnz", l.step_nnz},
          {"blocks", l.blocks},                 {"attention_fwd_s", l.step_seconds},
          {"ideal_attention_fwd_s", l.ideal_seconds}, {"overlap_lost_steps", l.overlap_lost_steps},
          {"ring_transfer_steps", l.transfer_steps}};
}

std::string csv_of(const ImbalanceReport& rep) {
  std::string out =
      "partition,layer,worker_imbalance,step_imbalance,worker_imbalance_nnz,step_imbalance_nnz,blocks,"
      "attention_fwd_s,ideal_attention_fwd_s,overlap_lost_steps,ring_transfer_steps\n";
  auto line = [&](const PartitionImbalance& p, const std::string& layer, const LayerImbalance& l) {
    out += fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.0f},{:.6e},{:.6e},{},{}\n", to_string(p.partition), layer,
                       l.worker, l.step, l.worker_nnz, l.step_nnz, l.blocks, l.step_seconds, l.ideal_seconds,
                       l.overlap_lost_steps, l.transfer_steps);
  };
  for (const auto& p : rep.partitions) {
    for (size_t i = 0; i < p.layers.size(); ++i) line(p, std::to_string(i), p.layers[i]);
    line(p, "total", p.total);
  }
  return out;
}

void run(const Options& o) {
  const Experiment e = o.exp.load();
  std::vector<Partition> parts;
  if (o.partitions.empty()) {
    parts = {Partition::contiguous, Partition::zigzag, Partition::stripe, Partition::balanced};
  } else {
    for (const auto& s : o.partitions) {
      auto p = partition_from_string(s);
      if (!p) throw ConfigError(fmt::format("--partition: expected contiguous, zigzag, stripe or balanced, got \"{}\"", s));
      parts.push_back(*p);
    }
  }
  generate::check_fits(generate::estimate_imbalance_footprint(e, int(parts.size())), "this imbalance report");
  ProgressLine progress(!o.exp.json);
  progress.update("building the sparsity pattern", 0, 1);
  pipeline::Session session;
  session.set_threads(default_threads());
  const auto& model = session.patterns(e);
  const ImbalanceReport rep =
      session.imbalance(e, parts, [&](const std::string& what, int d, int t) { progress.update(what, d, t); });

  if (!o.csv.empty()) traces::write_text_file_atomic(o.csv, csv_of(rep));

  if (o.exp.json) {
    nlohmann::json j;
    j["experiment"] = summary_json(e);
    j["seq_len"] = e.workload.seq_len;
    j["cp"] = e.parallel.cp;
    j["hp"] = e.parallel.hp;
    j["ring"] = to_string(e.parallel.ring);
    j["pattern"] = model.name();
    j["block_sparsity"] = rep.block_sparsity;
    j["partitions"] = nlohmann::json::object();
    for (const auto& p : rep.partitions) {
      nlohmann::json pj = to_json(p.total);
      pj["ideal_fraction"] = p.ideal_fraction;
      pj["kv_transfer_s"] = p.kv_transfer_seconds;
      pj["layers"] = nlohmann::json::array();
      for (const auto& l : p.layers) pj["layers"].push_back(to_json(l));
      j["partitions"][to_string(p.partition)] = pj;
    }
    j["skipped"] = rep.skipped;
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }

  std::string out = fmt::format(
      "experiment {}: {} tokens, {} x {} on {}, cp={} hp={}, {} attention, pattern {} (block sparsity {:.1f}%)\n\n",
      e.name, e.workload.seq_len, e.model.name, e.model.layers, e.cluster.name, e.parallel.cp, e.parallel.hp,
      placement::attention_kind_name(e), model.name(), 100 * rep.block_sparsity);
  Table t({"partition", "worker", "step", "worker(nnz)", "step(nnz)", "attn fwd ms", "ideal ms", "ideal share",
           "overlap lost"});
  for (const auto& p : rep.partitions)
    t.row({to_string(p.partition), fmt::format("{:.3f}", p.total.worker), fmt::format("{:.3f}", p.total.step),
           fmt::format("{:.3f}", p.total.worker_nnz), fmt::format("{:.3f}", p.total.step_nnz),
           fmt::format("{:.2f}", p.total.step_seconds * 1e3), fmt::format("{:.2f}", p.total.ideal_seconds * 1e3),
           fmt::format("{:.1f}%", 100 * p.ideal_fraction),
           fmt::format("{}/{}", p.total.overlap_lost_steps, p.total.transfer_steps)});
  out += t.str();
  if (o.per_layer) {
    for (const auto& p : rep.partitions) {
      out += fmt::format("\n{} per layer:\n", to_string(p.partition));
      Table lt({"layer", "worker", "step", "blocks", "attn fwd ms", "overlap lost"});
      for (size_t i = 0; i < p.layers.size(); ++i) {
        const auto& l = p.layers[i];
        lt.row({std::to_string(i), fmt::format("{:.3f}", l.worker), fmt::format("{:.3f}", l.step),
                fmt::format("{:.0f}", l.blocks), fmt::format("{:.3f}", l.step_seconds * 1e3),
                fmt::format("{}/{}", l.overlap_lost_steps, l.transfer_steps)});
      }
      out += lt.str();
    }
  }
  for (const auto& s : rep.skipped) out += fmt::format("skipped {}\n", s);
  out += "\nworker = max/mean of per-rank attention work; step = sum over ring steps of max/mean;\n"
         "ideal share = attention time left if every step were perfectly balanced; overlap lost = ring steps\n"
         "whose slowest compute is shorter than the next K/V transfer (layers x steps).\n";
  traces::write_standard_output(out);
}

}  // namespace

void register_imbalance(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("imbalance", "Worker- and step-level attention imbalance of each token partition");
  add_experiment_options(cmd, o->exp);
  add_output_option(cmd, "--csv", o->csv, "Also write per-layer and total figures as CSV to this file");
  cmd->add_option("--partition", o->partitions, "Only this partition (contiguous, zigzag, stripe, balanced; repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--per-layer", o->per_layer, "Print the per-layer table of each partition");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
