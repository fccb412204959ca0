// Hand a layout to the framework a user trains with: the experiment as a file
// `ringmaster simulate` loads back, or that framework's own flags or config
// (Megatron-LM, TransformerEngine, InternEvo/LoongTrain, yunchang/USP,
// MTraining). Where a framework cannot express the layout, the emission is of
// the nearest layout it runs, with each change and why (the caller predicts
// that layout too); where no near layout exists, emit() refuses with a
// ConfigError naming the reason. The mapping, key by key, with the source of
// each framework name: docs/frameworks.md. One file per framework.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"

namespace rm::frameworks {

enum class Framework { experiment, megatron, te, internevo, yunchang, mtraining };

const char* to_string(Framework f);
std::optional<Framework> framework_from_string(std::string_view s);
// "experiment, megatron, te, internevo, yunchang, mtraining": for messages and --help.
std::string framework_names();

struct Emission {
  Framework framework = Framework::experiment;
  std::string text;                  // the flags or config, as the framework takes them
  Experiment runs;                   // the layout the framework runs: the given one, or the nearest it expresses
  std::vector<std::string> changes;  // how `runs` differs from the given layout, one line each; empty: exact
};

// Throws ConfigError "<framework> cannot run this layout: <why>" where there is no near layout.
Emission emit(Framework f, const Experiment& e, const ConfigStore& store);

// e with its parallel block replaced by p, in the fields and in the resolved JSON
// (what an experiment file writes), checked as a parsed file's would be.
Experiment with_parallel(const Experiment& e, const Parallel& p);

// "dp2 tp1 hp1 cp4 zigzag ring ckpt=full zero1": the parallel keys an emission depends on, in one line.
std::string layout_line(const Parallel& p);

}  // namespace rm::frameworks
