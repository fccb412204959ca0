#include "tools/cli/cli_common.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace rm::cli {

void add_experiment_options(CLI::App* cmd, ExperimentOptions& o) {
  cmd->add_option("experiment", o.file,
                  "Experiment JSON file, or the name of one under configs/experiments/ (default: the embedded " +
                      std::string(kDefaultExperiment) + ")");
  cmd->add_option("--set", o.sets, "Override a field: --set workload.seq_len=128k --set parallel.cp=8 (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--configs", o.config_dirs,
                  "Folder with clusters/ models/ patterns/ experiments/ searched before the embedded configs");
  cmd->add_flag("--json", o.json, "Print JSON for machines instead of a table");
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
