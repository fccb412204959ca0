// ringmaster: which placement and ring schedule is fastest on my cluster, how
// fast, and why. One subcommand per task; each lives in tools/cli/cmd_*.cpp.
// Exit status (README.md, "Exit status"): 0 success; 2 bad input, one line on
// stderr: usage, a config, an input file, an environment variable, or a
// destination that cannot be written; 1 anything else (an unexpected failure).
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "sim/config/json_reader.hpp"
#include "traces/trace_error.hpp"
#include "tools/cli/allocator_tuning.hpp"
#include "tools/cli/cli_common.hpp"
#include "tools/cli/version.hpp"

int main(int argc, char** argv) {
  rm::cli::back_heap_with_huge_pages(argv);  // may re-execute this program once
  CLI::App app{"ringmaster: which placement and ring schedule is fastest for long-context attention on a GPU "
               "cluster, how fast, and why"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ringmaster ") + rm::cli::kVersion + " (git " +
                                        rm::cli::kGitRevision + ")");
  rm::cli::register_calibrate(app);
  rm::cli::register_compare(app);
  rm::cli::register_diff(app);
  rm::cli::register_imbalance(app);
  rm::cli::register_import(app);
  rm::cli::register_init(app);
  rm::cli::register_plan(app);
  rm::cli::register_replay(app);
  rm::cli::register_schedule(app);
  rm::cli::register_simulate(app);
  rm::cli::register_sweep(app);
  try {
    app.parse(argc, argv);
    rm::cli::print_warnings();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage error is bad input like a config error: one line, exit 2.
    std::fprintf(stderr, "ringmaster: error: %s (see ringmaster --help)\n", e.what());
    return 2;
  } catch (const rm::ConfigError& e) {
    std::fprintf(stderr, "ringmaster: error: %s\n", e.what());
    return 2;
  } catch (const rm::traces::TraceError& e) {  // a bad trace file, or a destination (traces::OutputError)
    std::fprintf(stderr, "ringmaster: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
