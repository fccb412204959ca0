// `ringmaster sweep`: the cross product of --grid axes over any experiment
// key, every point simulated on every core (and across processes under
// mpirun), one row per point as a table, CSV (--out) or JSON (--json).
// docs/sweep.md.
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sim/search/evaluate.hpp"
#include "sim/search/grid.hpp"
#include "sim/search/sweep_table.hpp"
#include "traces/text_file.hpp"
#include "traces/text_write.hpp"
#include "tools/cli/cli_common.hpp"
#include "tools/cli/allocator_tuning.hpp"
#include "tools/cli/mpi_world.hpp"

namespace rm::cli {

namespace {

struct Options {
  ExperimentOptions exp;
  std::vector<std::string> grid;
  std::string engine = "analytic";
  std::string out;
  int jobs = 0;
  bool quiet = false;
};

// This process's rows: the points i with i % ranks == rank, simulated on `jobs` threads.
std::vector<nlohmann::ordered_json> run_share(const search::Grid& grid, const std::vector<search::GridPoint>& points,
                                              engine::EngineKind kind, int jobs, const MpiWorld& world,
                                              bool progress_on) {
  std::vector<size_t> mine, runnable;
  for (size_t i = 0; i < points.size(); ++i)
    if (static_cast<int>(i % static_cast<size_t>(world.size())) == world.rank()) mine.push_back(i);
  std::vector<Experiment> todo;
  for (size_t i : mine)
    if (points[i].experiment) {
      runnable.push_back(i);
      todo.push_back(*points[i].experiment);
    }
  const std::string what =
      world.size() > 1 ? fmt::format("sweep (rank 0 of {}: its share)", world.size()) : std::string("sweep");
  PointProgress progress(what, progress_on && world.rank() == 0);
  search::EvaluateOptions eo;
  eo.engine = kind;
  eo.jobs = jobs;
  eo.progress = [&](int64_t done, int64_t total) { progress.update(done, total); };
  const std::vector<search::Outcome> outcomes = search::evaluate(todo, eo);

  std::vector<nlohmann::ordered_json> rows;
  size_t next = 0;
  for (size_t i : mine) {
    const search::Outcome* o = nullptr;
    if (next < runnable.size() && runnable[next] == i) o = &outcomes[next++];
    rows.push_back(search::sweep_row(grid, points[i], o));
  }
  return rows;
}

// Every rank's rows on rank 0, in point order (empty on the other ranks).
std::vector<nlohmann::ordered_json> gather_rows(std::vector<nlohmann::ordered_json> mine, const MpiWorld& world) {
  if (world.size() == 1) return mine;
  const std::vector<std::string> parts = world.gather(nlohmann::ordered_json(std::move(mine)).dump());
  std::vector<nlohmann::ordered_json> all;
  for (const std::string& p : parts)
    for (auto& r : nlohmann::ordered_json::parse(p)) all.push_back(std::move(r));
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a["point"].template get<int64_t>() < b["point"].template get<int64_t>();
  });
  return all;
}

std::string number(const nlohmann::ordered_json& v, const char* format) {
  return v.is_number() ? fmt::format(fmt::runtime(format), v.get<double>()) : std::string("-");
}

// The pattern, kernel and framework of the points, each distinct setup once
// (a grid over workload.pattern or the cluster may change the kernel).
std::string point_setups(const std::vector<search::GridPoint>& points) {
  std::vector<std::string> seen;
  for (const auto& p : points)
    if (p.experiment && std::find(seen.begin(), seen.end(), setup_words(*p.experiment)) == seen.end())
      seen.push_back(setup_words(*p.experiment));
  return fmt::format("{}", fmt::join(seen, "; "));
}

std::string text_report(const search::Grid& grid, const std::vector<nlohmann::ordered_json>& rows,
                        const std::string& engine, const std::string& setups, const std::string& out) {
  std::vector<std::string> header{"point"};
  for (const auto& a : grid.axes()) header.push_back(a.key);
  for (const char* h : {"step", "tokens/s", "MFU", "HFU", "imbalance", "compute", "exposed comm", "idle", "memory/GPU", "bound by"})
    header.emplace_back(h);
  Table t(header);
  std::string errors;
  int64_t failed = 0, streamed = 0;
  for (const auto& r : rows) {
    std::vector<std::string> cells{r["point"].dump()};
    for (const auto& a : grid.axes()) cells.push_back(search::csv_cell_text(r[a.key]));
    if (!r["error"].is_null()) {
      ++failed;
      cells.emplace_back("cannot run");
      errors += fmt::format("  point {}: {}\n", r["point"].dump(), r["error"].get<std::string>());
    } else {
      cells.push_back(number(r["step_time_s"], "{:.4g} s"));
      cells.push_back(number(r["tokens_per_s"], "{:.4g}"));
      cells.push_back(number(r["mfu"], "{:.3f}"));
      cells.push_back(number(r["hfu"], "{:.3f}"));
      cells.push_back(number(r["imbalance_worker"], "{:.3f}"));
      cells.push_back(number(r["compute_s"], "{:.4g} s"));
      cells.push_back(number(r["exposed_comm_s"], "{:.4g} s"));
      cells.push_back(number(r["idle_s"], "{:.4g} s"));
      cells.push_back((r["memory_oom"] == true ? "OOM " : "") + number(r["memory_peak_GB"], "{:.1f} GB"));
      streamed += search::csv_cell_text(r["simulated"]).starts_with("streamed") ? 1 : 0;
      cells.push_back(search::csv_cell_text(r["bound_by"]));
    }
    t.row(std::move(cells));
  }
  std::string text = fmt::format("sweep: {} points over {} grid key(s), engine {}; imbalance = worker ratio, "
                                 "compute / exposed comm / idle = mean per GPU, "
                                 "OOM = peak memory above the GPU's\n",
                                 rows.size(), grid.axes().size(), engine);
  if (!setups.empty()) text += setups + "\n";
  text += "\n";
  text += t.str();
  if (streamed > 0)
    text += fmt::format("\n{} of {} points were streamed: too large to hold whole in this machine's memory, "
                        "simulated a piece at a time to the same figures\n",
                        streamed, rows.size());
  if (failed > 0) text += fmt::format("\n{} of {} points cannot run:\n{}", failed, rows.size(), errors);
  if (!out.empty()) text += fmt::format("\nrows written to {}\n", out);
  return text;
}

void run(const Options& o, const MpiWorld& world) {
  keep_freed_memory();
  const auto kind = engine::parse_engine_kind(o.engine);
  if (!kind) throw ConfigError(fmt::format("--engine: expected analytic or simgrid, got \"{}\"", o.engine));
  if (o.jobs < 0) throw ConfigError(fmt::format("--jobs: expected 0 (every core) or more, got {}", o.jobs));
  if (o.out == "-" && o.exp.json)
    throw ConfigError("--out -: standard output already carries the --json document; give --out a file");
  std::vector<search::GridAxis> axes;
  for (const auto& g : o.grid) axes.push_back(search::parse_grid_axis(g));
  const search::Grid grid(std::move(axes));
  // Every rank loads the whole grid (cheap, deterministic), so every rank
  // refuses bad input alike and agrees on which points exist.
  const std::vector<search::GridPoint> points = search::load_grid(grid, o.exp.store(), o.exp.file, o.exp.sets);

  // Ranks sharing a machine share its cores.
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1, search::worker_count(0) / world.local_size());
  std::vector<nlohmann::ordered_json> rows;
  try {
    rows = gather_rows(run_share(grid, points, *kind, jobs, world, !o.quiet), world);
  } catch (const std::exception& e) {
    if (world.size() == 1) throw;
    // The other ranks would wait in the gather for ever.
    std::fprintf(stderr, "ringmaster: error: rank %d: %s\n", world.rank(), e.what());
    world.abort(1);
  }
  if (world.rank() != 0) return;

  const std::vector<std::string> columns = search::sweep_columns(grid);
  if (!o.out.empty()) traces::write_text_file_atomic(o.out, search::sweep_csv(columns, rows));
  if (o.exp.json) {
    nlohmann::ordered_json j;
    // The experiment the grid varies (its name and file; each row has the values that vary).
    for (const auto& p : points)
      if (p.experiment) {
        j["experiment"] = {{"name", p.experiment->name}, {"source", p.experiment->source}};
        break;
      }
    j["engine"] = o.engine;
    nlohmann::ordered_json g = nlohmann::ordered_json::array();
    for (const auto& a : grid.axes()) g.push_back({{"key", a.key}, {"values", a.values}});
    j["grid"] = std::move(g);
    j["points"] = rows.size();
    j["columns"] = columns;
    j["rows"] = rows;
    if (!o.out.empty()) j["csv"] = o.out;
    traces::write_standard_output(j.dump(2) + "\n");
    return;
  }
  if (o.out != "-") traces::write_standard_output(text_report(grid, rows, o.engine, point_setups(points), o.out));
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Simulate the cross product of --grid values of any experiment keys: one row per point (table, CSV, JSON)");
  add_experiment_options(cmd, o->exp);
  cmd->add_option("--grid", o->grid,
                  "An axis: KEY=V1,V2,... over any experiment key, e.g. parallel.cp=8,16,32 or "
                  "cluster.nic.bandwidth_Gbps=200,400,800 (repeatable; the sweep is the cross product)")
      ->allow_extra_args(false);
  cmd->add_option("--engine", o->engine, "analytic (fast list scheduler) or simgrid (flow-level contention)")
      ->capture_default_str();
  add_output_option(cmd, "--out", o->out, "Write the rows as CSV to this file (written whole at the end, or not at all); - = standard output, instead of the table");
  cmd->add_option("--jobs", o->jobs, "Worker threads per process; 0 = every core (shared by the ranks of a machine)")
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No progress on stderr");
  cmd->callback([o] {
    // MPI lives only as long as the command: initialised when launched by mpirun.
    MpiWorld world;
    try {
      run(*o, world);
    } catch (const ConfigError& e) {
      // Every rank refuses bad input alike; one line (rank 0's) is enough. Rank 0
      // prints it before MPI_Finalize: once every rank has finalised, mpirun may
      // kill the job as soon as one of them exits non-zero, line unprinted.
      if (!world.active()) throw;
      if (world.rank() == 0) {
        std::fprintf(stderr, "ringmaster: error: %s\n", e.what());
        std::fflush(stderr);
      }
      world.finalize();
      std::exit(2);
    }
  });
}

}  // namespace rm::cli
