// `ringmaster import megatron [EXPERIMENT]`: a Megatron-LM argument list (pretrain_gpt.py's)
// read into an experiment over a base experiment's cluster, pattern and kernel
// (sim/frameworks/megatron_import.hpp): the table of what each argument became,
// one warning listing what was not read, and the experiment file (-o) that
// `ringmaster simulate` and `plan` take.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/frameworks/framework.hpp"
#include "sim/frameworks/megatron_import.hpp"
#include "tools/cli/cli_common.hpp"
#include "traces/text_file.hpp"

namespace rm::cli {

namespace {

struct Options {
  std::string framework;
  ExperimentOptions exp;  // the base: cluster, pattern, kernel, scope
  std::string args;
  std::string args_file;
  int gpus = 0;
  std::string file;
};

std::string read_args(const Options& o) {
  if (o.args.empty() == o.args_file.empty())
    throw ConfigError("import megatron: expected the Megatron arguments in exactly one of --args or --args-file");
  if (o.args_file.empty()) return o.args;
  std::FILE* f = std::fopen(o.args_file.c_str(), "rb");
  if (!f) throw ConfigError(fmt::format("--args-file {}: cannot be read", o.args_file));
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

void run(const Options& o) {
  if (o.framework != "megatron")
    throw ConfigError(fmt::format("import: expected the framework megatron (the only one read back), got \"{}\"",
                                  o.framework));
  if (o.gpus < 0) throw ConfigError(fmt::format("--gpus: expected 0 (from the batch sizes) or more, got {}", o.gpus));
  const std::string args = read_args(o);
  const ConfigStore store = o.exp.store();
  // The base as written, with --set applied; its own layout is replaced, so never checked.
  LoadedConfig base = o.exp.file.empty() ? store.load("experiments", kDefaultExperiment, "default experiment")
                                         : store.load("experiments", o.exp.file, "experiment");
  for (const auto& set : o.exp.sets) apply_override(base.json, set, store, base.base_dir);
  const std::string base_name = base.json.value("name", std::string("experiment"));
  const frameworks::MegatronImport imp = [&] {
    try {
      return frameworks::import_megatron(args, o.gpus, store);
    } catch (const ConfigError& err) {
      if (o.args_file.empty()) throw;
      throw ConfigError(fmt::format("--args-file {}: {}", o.args_file, err.what()));  // which file, too
    }
  }();
  nlohmann::json j = base.json;
  j["name"] = base_name + "-megatron";
  j["description"] = fmt::format("Read from Megatron-LM arguments (ringmaster import megatron) over the cluster, "
                                 "pattern and kernel of {}.", base_name);
  j["model"] = imp.model;
  j["workload"]["seq_len"] = imp.workload["seq_len"];
  j["workload"]["batch"] = imp.workload["batch"];
  j["parallel"] = imp.parallel;
  const std::string source = o.args_file.empty() ? "--args" : o.args_file;
  if (j.contains("scope_layer")) j.erase("scope_layer");  // a layer of the base's model may not exist in this one
  const Experiment e =
      parse_experiment(j, fmt::format("{} (read as an experiment over {})", source, base.source), base.base_dir, store);
  const std::string text = frameworks::emit(frameworks::Framework::experiment, e, store).text;
  if (!o.file.empty()) traces::write_text_file_atomic(o.file, text);
  if (!imp.ignored.empty())
    std::fprintf(stderr, "ringmaster: warning: not read from the Megatron arguments: %s\n",
                 fmt::format("{}", fmt::join(imp.ignored, "; ")).c_str());
  if (o.exp.json) {
    nlohmann::json out = {{"experiment", nlohmann::json::parse(text)}, {"ignored", imp.ignored}};
    out["read"] = nlohmann::json::array();
    for (const auto& r : imp.read) out["read"].push_back({{"argument", r.argument}, {"key", r.key}, {"value", r.value}});
    if (!o.file.empty()) out["file"] = o.file;
    traces::write_standard_output(out.dump(2) + "\n");
    return;
  }
  Table t({"Megatron argument", "ringmaster key", "value"});
  for (const auto& r : imp.read) t.row({r.argument, r.key, r.value});
  std::string s = fmt::format("Megatron arguments read as an experiment over {} (cluster {}, pattern and kernel kept)\n\n",
                              base_name, e.cluster.name);
  s += t.str();
  s += fmt::format("\nlayout: {} on {} GPUs\n", frameworks::layout_line(e.parallel), e.parallel.world());
  s += o.file.empty() ? "give -o FILE to write the experiment (or --json to print it)\n"
                      : fmt::format("experiment written to {}\n", o.file);
  traces::write_standard_output(s);
}

}  // namespace

void register_import(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Read a framework's settings into an experiment: `import megatron [EXPERIMENT] --args \"...\"` reads "
                "Megatron-LM pretrain_gpt.py arguments over the experiment's cluster, pattern and kernel");
  // Before the experiment options, so the first positional is the framework.
  cmd->add_option("framework", o->framework, "The framework whose settings are read: megatron")->required();
  add_experiment_options(cmd, o->exp);
  cmd->add_option("--args", o->args, "The arguments, as one string: \"--num-layers 32 --hidden-size 4096 ...\"");
  cmd->add_option("--args-file", o->args_file, "A file holding the arguments (comments and line continuations allowed)");
  cmd->add_option("--gpus", o->gpus, "The world size (data parallel = GPUs / (tp x cp)); default: global / micro batch");
  add_output_option(cmd, "-o,--output", o->file, "Write the experiment to this file");
  cmd->callback([o] { run(*o); });
}

}  // namespace rm::cli
