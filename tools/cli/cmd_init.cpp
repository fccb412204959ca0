// `ringmaster init`: start from your own job. Writes a complete experiment file
// from model, cluster, nodes, sequence length and mask, and says every value it
// chose for you, so `ringmaster simulate FILE` answers for that job.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/experiment_init.hpp"
#include "traces/text_file.hpp"
#include "tools/cli/cli_common.hpp"

namespace rm::cli {

namespace {

struct Options {
  InitRequest request;
  int nodes = 0;  // 0: the cluster file's
  std::string out;
  bool force = false;
  bool json = false;
  std::vector<std::string> config_dirs;
};

void run(Options o) {
  if (o.nodes != 0) o.request.nodes = o.nodes;
  const std::string out = o.out.empty() ? o.request.name + ".json" : o.out;
  if (out != "-" && !o.force && std::filesystem::exists(out))
    throw ConfigError(fmt::format("-o {}: the file exists; give another name or --force to replace it", out));
  const InitResult r = init_experiment(o.request, ConfigStore(o.config_dirs));
  const std::string text = r.experiment.dump(2) + "\n";
  if (out == "-") {
    traces::write_standard_output(text);
  } else {
    traces::write_text_file_atomic(out, text);
  }
  // With -o -, standard output carries the file: the choices go to stderr. Written by length.
  auto report = [&](const std::string& s) {
    if (out == "-") std::fwrite(s.data(), 1, s.size(), stderr);
    else traces::write_standard_output(s);
  };
  if (o.json && out != "-") {
    nlohmann::ordered_json j{{"file", out}, {"experiment", r.experiment}};
    nlohmann::ordered_json choices = nlohmann::ordered_json::array();
    for (const auto& c : r.choices) choices.push_back({{"key", c.key}, {"value", c.value}, {"why", c.why}});
    j["chosen"] = std::move(choices);
    report(j.dump(2) + "\n");
    return;
  }
  Table t({"chosen for you", "value", "why"});
  for (const auto& c : r.choices) t.row({c.key, c.value, c.why});
  std::string s = out == "-" ? std::string() : fmt::format("wrote {}\n", out);
  s += t.str();
  s += fmt::format("edit the file to change any of them; then: ringmaster simulate {}\n", out == "-" ? "FILE" : out);
  report(s);
}

}  // namespace

void register_init(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "init", "Start from your own job: write an experiment file from model, cluster, nodes, sequence length and "
              "mask, saying every value it chose");
  cmd->add_option("name", o->request.name, "The experiment's name (the file is NAME.json unless -o says)")->required();
  cmd->add_option("--model", o->request.model, "A model under configs/models/ (or a .json file)")->required();
  cmd->add_option("--cluster", o->request.cluster, "A cluster under configs/clusters/ (or a .json file)")->required();
  cmd->add_option("--nodes", o->nodes, "Nodes of the cluster the job uses (default: the cluster file's)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--seq-len", o->request.seq_len, "Tokens per sequence: 131072, 128k, 1M")->required();
  cmd->add_option("--pattern", o->request.pattern, "An attention mask under configs/patterns/")->capture_default_str();
  cmd->add_option("--kernel", o->request.kernel,
                  "The attention kernel under configs/kernels/ (default: FlashAttention-2 on Ampere, -3 on Hopper, "
                  "block_sparse for vertical-slash masks)");
  add_output_option(cmd, "--out,-o", o->out, "Write the experiment here (default NAME.json; - = standard output)");
  cmd->add_flag("--force", o->force, "Replace the file when it exists");
  cmd->add_option("--configs", o->config_dirs,
                  "Folder with clusters/ models/ patterns/ searched before the embedded configs (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", o->json, "Print the file written and the choices as JSON instead of a table");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
