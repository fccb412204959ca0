#include "tools/cli/cli_common.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "traces/text_write.hpp"

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

CLI::Option* add_output_option(CLI::App* cmd, const std::string& flags, std::string& path, const std::string& help) {
  // An empty name for the validator: the help shows the option as before.
  const CLI::Validator writable([](std::string& p) { return traces::output_path_problem(p); }, "");
  return cmd->add_option(flags, path, help)->check(writable);
}

std::string setup_words(const Experiment& e) {
  // Framework profiles (configs/frameworks/) do not exist yet: none is ever in effect.
  return fmt::format("pattern {} ({}), attention kernel {}, framework profile none", pattern_name(e.workload),
                     pattern_kind(e.workload), e.kernel.name);
}

namespace {
std::vector<std::string>& pending_warnings() {
  static std::vector<std::string> w;
  return w;
}
}  // namespace

Experiment ExperimentOptions::load() const {
  Experiment e = load_experiment(store(), file, sets);
  for (const auto& w : e.warnings) pending_warnings().push_back(w);
  return e;
}

void print_warnings() {
  for (const auto& w : pending_warnings()) std::fprintf(stderr, "ringmaster: warning: %s\n", w.c_str());
  pending_warnings().clear();
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
  out += fmt::format("  {} ({})\n", setup_words(e), e.kernel_choice);
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

std::string human_duration(double s) {
  if (!(s >= 0)) return "?";
  if (s < 60) return fmt::format("{:.0f} s", s);
  const auto t = static_cast<int64_t>(s + 0.5);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
}

PointProgress::PointProgress(std::string what, bool enabled, std::chrono::seconds plain_every, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      on_(enabled),
      terminal_(isatty(STDERR_FILENO) != 0),
      plain_every_(plain_every),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

PointProgress::~PointProgress() {
  if (drawn_ && terminal_) std::fputs("\r\033[K", stderr);
}

void PointProgress::update(int64_t done, int64_t total) {
  if (!on_ || total <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= total;
  if (terminal_ ? (!last && now - last_ < std::chrono::milliseconds(100)) : (now - last_ < plain_every_ || last))
    return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const std::string eta = rate > 0 ? human_duration(static_cast<double>(total - done) / rate) : "?";
  const int pct = static_cast<int>(100 * done / total);
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    std::fprintf(stderr, "\r\033[K%s [%s%s] %3d%% %lld/%lld %s, %.3g/s, ETA %s", what_.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(), pct,
                 static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(), rate, eta.c_str());
  } else {
    std::fprintf(stderr, "%s: %lld/%lld %s (%d%%), %.3g %s/s, ETA %s\n", what_.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), unit_.c_str(), pct, rate, unit_.c_str(), eta.c_str());
  }
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
