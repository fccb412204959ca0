#include "tools/cli/cli_common.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace rm::cli {

void add_experiment_options(CLI::App* cmd, ExperimentOptions& o) {
  cmd->add_option("experiment", o.file,
                  "Experiment JSON file, or the name of one under configs/experiments/ (default: the embedded " +
                      std::string(kDefaultExperiment) + ")");
  // allow_extra_args(false): one value per flag, so `--set a=1 EXP` leaves EXP to the positional
  // (CLI11's vector options otherwise take every following argument).
  cmd->add_option("--set", o.sets, "Override a field: --set workload.seq_len=128k --set parallel.cp=8 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--configs", o.config_dirs,
                  "Folder with clusters/ models/ patterns/ experiments/ searched before the embedded configs "
                  "(one per flag, repeatable; earlier folders win)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", o.json, "Print JSON for machines instead of a table");
}

std::string experiment_header(const Experiment& e) {
  const nlohmann::json j = summary_json(e);
  auto keys = [](const nlohmann::json& o) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : o.items()) kv.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    return fmt::format("{}", fmt::join(kv, " "));
  };
  std::string out = fmt::format("experiment {} ({}): model {} on cluster {}, scope {}\n", e.name, e.source,
                                e.model.name, e.cluster.name, to_string(e.scope));
  out += fmt::format("  workload {}\n  parallel {}\n", keys(j["workload"]), keys(j["parallel"]));
  if (e.parallel.world() < e.cluster.gpus())
    out += fmt::format("  uses {} of the cluster's {} GPUs (dp*tp*hp*cp)\n", e.parallel.world(), e.cluster.gpus());
  return out;
}

ProgressLine::ProgressLine(bool enabled) : on_(enabled && isatty(STDERR_FILENO)) {}
ProgressLine::~ProgressLine() {
  if (drawn_) std::fputs("\r\033[K", stderr);
}
void ProgressLine::update(const std::string& what, int done, int total) {
  if (!on_) return;
  std::fprintf(stderr, "\r\033[K[%3d%%] %s", total > 0 ? 100 * done / total : 100, what.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

std::string Table::str() const {
  std::vector<size_t> width(header_.size(), 0);
  auto fit = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  };
  fit(header_);
  for (const auto& r : rows_) fit(r);
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string& c = i < r.size() ? r[i] : std::string();
      out += i == 0 ? fmt::format("{:<{}}", c, width[i]) : fmt::format("  {:>{}}", c, width[i]);
    }
    out += '\n';
  };
  line(header_);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out += std::string(total - 2, '-') + '\n';
  for (const auto& r : rows_) line(r);
  return out;
}

}  // namespace rm::cli
