// `--emit FRAMEWORK [-o FILE]` on plan and simulate: the layout handed over as
// an experiment file or a framework's flags (sim/frameworks/), and, where the
// framework runs only a nearest layout, that layout predicted beside it.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sim/frameworks/framework.hpp"

namespace rm::cli {

struct EmitOptions {
  std::string framework;  // empty: nothing to emit
  std::string file;       // empty: the emission goes with the report
};

void add_emit_options(CLI::App* cmd, EmitOptions& o, const std::string& what);

// The framework --emit names, checked before any work (ConfigError naming --emit); nullopt: none asked.
std::optional<frameworks::Framework> emit_framework(const EmitOptions& o);

struct Emitted {
  frameworks::Emission emission;
  double step_s = 0;                     // the asked layout's step, analytic engine
  std::optional<double> nearest_step_s;  // the nearest layout's, analytic engine, where it differs
  std::string nearest_error;             // why the nearest layout could not be simulated
};

// Emits e for f (a refusal throws ConfigError before anything is written),
// predicts the nearest layout where it differs, and writes the file when asked.
// step_s: e's analytic step time, already simulated.
Emitted emit_layout(const EmitOptions& o, frameworks::Framework f, const Experiment& e, const ConfigStore& store,
                    double step_s);

// What a text report ends with, and the "emit" object of a JSON one.
std::string emitted_text(const EmitOptions& o, const Emitted& r);
nlohmann::json emitted_json(const EmitOptions& o, const Emitted& r);

}  // namespace rm::cli
