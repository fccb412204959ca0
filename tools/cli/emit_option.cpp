#include "tools/cli/emit_option.hpp"

#include <fmt/format.h>

#include "sim/search/evaluate.hpp"
#include "tools/cli/cli_common.hpp"
#include "traces/text_file.hpp"

namespace rm::cli {

void add_emit_options(CLI::App* cmd, EmitOptions& o, const std::string& what) {
  cmd->add_option("--emit", o.framework,
                  fmt::format("Hand {} over as {}: a complete experiment file, or that framework's flags or config "
                              "(the nearest layout it runs where it cannot run this one, predicted beside it; "
                              "docs/frameworks.md)",
                              what, frameworks::framework_names()));
  add_output_option(cmd, "-o,--emit-file", o.file, "Write the --emit output to this file instead of the report");
}

std::optional<frameworks::Framework> emit_framework(const EmitOptions& o) {
  if (o.framework.empty()) {
    if (!o.file.empty()) throw ConfigError("-o/--emit-file: expected --emit FRAMEWORK with it");
    return std::nullopt;
  }
  const auto f = frameworks::framework_from_string(o.framework);
  if (!f)
    throw ConfigError(fmt::format("--emit: expected one of {}, got \"{}\"", frameworks::framework_names(), o.framework));
  return f;
}

Emitted emit_layout(const EmitOptions& o, frameworks::Framework f, const Experiment& e, const ConfigStore& store,
                    double step_s) {
  Emitted r;
  r.emission = frameworks::emit(f, e, store);
  r.step_s = step_s;
  if (!r.emission.changes.empty()) {
    // The whole step, streamed where only that fits (as `simulate` does), never estimated.
    search::EvaluateOptions analytic;
    analytic.bound_by = false;
    pipeline::Session session;
    const search::Outcome out = search::evaluate_one(r.emission.runs, analytic, session);
    if (out.ok) r.nearest_step_s = out.report.step_time_s;
    else r.nearest_error = out.error;
  }
  if (!o.file.empty()) traces::write_text_file_atomic(o.file, r.emission.text);
  return r;
}

std::string emitted_text(const EmitOptions& o, const Emitted& r) {
  const char* name = frameworks::to_string(r.emission.framework);
  std::string s = "\n";
  if (r.emission.changes.empty()) {
    s += fmt::format("--emit {}: this layout, exactly\n", name);
  } else {
    s += fmt::format("--emit {}: {} cannot run this layout; the nearest it runs is {}\n", name, name,
                     frameworks::layout_line(r.emission.runs.parallel));
    for (const auto& c : r.emission.changes) s += fmt::format("  {}\n", c);
    if (r.nearest_step_s)
      s += fmt::format("  predicted step: {:.4g} s for the nearest layout, {:.4g} s for this one ({:+.1f}%; analytic)\n",
                       *r.nearest_step_s, r.step_s, 100 * (*r.nearest_step_s / r.step_s - 1));
    else
      s += fmt::format("  the nearest layout could not be simulated: {}\n", r.nearest_error);
  }
  if (!o.file.empty()) s += fmt::format("written to {}\n", o.file);
  else s += "\n" + r.emission.text;
  return s;
}

nlohmann::json emitted_json(const EmitOptions& o, const Emitted& r) {
  nlohmann::json j = {{"framework", frameworks::to_string(r.emission.framework)},
                      {"exact", r.emission.changes.empty()},
                      {"changes", r.emission.changes},
                      {"runs", summary_json(r.emission.runs)["parallel"]},
                      {"step_time_s", r.step_s}};
  if (r.nearest_step_s) j["nearest_step_time_s"] = *r.nearest_step_s;
  if (!r.nearest_error.empty()) j["nearest_error"] = r.nearest_error;
  if (!o.file.empty()) j["file"] = o.file;
  else j["text"] = r.emission.text;
  return j;
}

}  // namespace rm::cli
