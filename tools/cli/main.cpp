// ringmaster: which placement and ring schedule is fastest on my cluster, how
// fast, and why. One subcommand per task; each lives in tools/cli/cmd_*.cpp.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "sim/config/json_reader.hpp"
#include "tools/cli/cli_common.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ringmaster: plan, simulate and run long-context attention across a GPU cluster"};
  app.require_subcommand(1);
  rm::cli::register_imbalance(app);
  rm::cli::register_schedule(app);
  rm::cli::register_simulate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rm::ConfigError& e) {
    std::fprintf(stderr, "ringmaster: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
