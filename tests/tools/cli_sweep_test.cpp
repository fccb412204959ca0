// `ringmaster sweep` through the real CLI: every CSV row equals `simulate
// --json` of its point to the digit, --jobs 1 and --jobs 2 and a 2-process
// mpirun give byte-identical CSV, cluster what-ifs work, and bad input is one
// line, exit 2 and no CSV.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// One 8-GPU node, 16K tokens, attention forward and backward: 12 points in about a second.
const std::string kBase =
    " --set cluster=h200-1x8 --set parallel.cp=8 --set workload.seq_len=16k --set scope=attention_fwd_bwd";
const std::string kGrid =
    " --grid parallel.ring=ring,hierarchical --grid parallel.partition=zigzag,stripe,contiguous"
    " --grid cluster.nic.bandwidth_Gbps=200,800";

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

std::vector<std::vector<std::string>> csv_lines(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) rows.push_back(split(line));
  return rows;
}

TEST(CliSweep, EveryRowIsSimulateJsonOfItsPointToTheDigit) {
  const auto dir = temp_dir("cli_sweep_rows");
  const std::string csv = (dir / "rows.csv").string();
  auto r = run_cli("sweep --quiet" + kBase + kGrid + " --out " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("12 points over 3 grid key(s)"));
  EXPECT_THAT(r.out, HasSubstr("rows written to " + csv));
  const auto rows = csv_lines(slurp(csv));
  ASSERT_EQ(rows.size(), 13u);
  const std::vector<std::string>& h = rows[0];
  ASSERT_GE(h.size(), 5u);
  EXPECT_EQ(h[0], "point");
  EXPECT_EQ(h[1], "parallel.ring");
  EXPECT_EQ(h[2], "parallel.partition");
  EXPECT_EQ(h[3], "cluster.nic.bandwidth_Gbps");
  EXPECT_EQ(h.back(), "error");
  auto col = [&](const std::string& name) {
    const auto it = std::find(h.begin(), h.end(), name);
    EXPECT_NE(it, h.end()) << name;
    return static_cast<size_t>(it - h.begin());
  };
  // Check a spread of points (each simulate is a process; all 12 would be slow for little).
  for (size_t p : {0u, 3u, 4u, 9u, 11u}) {
    const auto& row = rows[p + 1];
    ASSERT_EQ(row.size(), h.size()) << p;
    EXPECT_EQ(row[0], std::to_string(p));
    const std::string sets = kBase + " --set parallel.ring=" + row[1] + " --set parallel.partition=" + row[2] +
                             " --set cluster.nic.bandwidth_Gbps=" + row[3];
    auto s = run_cli("simulate --json" + sets);
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto j = nlohmann::json::parse(s.out);
    EXPECT_EQ(row[col("step_time_s")], j["step_time_s"].dump()) << p;
    EXPECT_EQ(row[col("tokens_per_s")], j["tokens_per_s"].dump()) << p;
    EXPECT_EQ(row[col("mfu")], j["mfu"].dump()) << p;
    EXPECT_EQ(row[col("hfu")], j["hfu"].dump()) << p;
    EXPECT_EQ(row[col("imbalance_worker")], j["imbalance"]["worker"].dump()) << p;
    EXPECT_EQ(row[col("imbalance_step")], j["imbalance"]["step"].dump()) << p;
    EXPECT_EQ(row[col("compute_s")], j["breakdown"]["mean"]["compute_s"].dump()) << p;
    EXPECT_EQ(row[col("exposed_comm_s")], j["breakdown"]["mean"]["exposed_comm_s"].dump()) << p;
    EXPECT_EQ(row[col("idle_s")], j["breakdown"]["mean"]["idle_s"].dump()) << p;
    EXPECT_EQ(row[col("memory_peak_GB")], j["memory"]["peak_GB"].dump()) << p;
    EXPECT_EQ(row[col("memory_oom")], j["memory"]["oom"].dump()) << p;
    EXPECT_EQ(row[col("bound_by")], j["bound_by"]["brief"].get<std::string>()) << p;
    EXPECT_EQ(row[col("gpus")], j["gpus"].dump()) << p;
    EXPECT_EQ(row[col("ops")], j["ops"].dump()) << p;
    EXPECT_EQ(row[col("generator")], j["generator"].get<std::string>()) << p;
    EXPECT_EQ(row[col("error")], "") << p;
  }
  // The NIC is no bottleneck inside one node: 200 and 800 Gb/s give the same step.
  EXPECT_EQ(rows[1][col("step_time_s")], rows[2][col("step_time_s")]);
  std::filesystem::remove_all(dir);
}

TEST(CliSweep, JobsAndJsonAgreeByteForByte) {
  const auto dir = temp_dir("cli_sweep_jobs");
  // The same relative --out in two folders, so the JSON (which names it) can compare too.
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  const std::string a = (dir / "a" / "rows.csv").string(), b = (dir / "b" / "rows.csv").string();
  auto r1 = run_cli("sweep --quiet --jobs 1 --json" + kBase + kGrid + " --out rows.csv", (dir / "a").string());
  auto r2 = run_cli("sweep --quiet --jobs 2 --json" + kBase + kGrid + " --out rows.csv", (dir / "b").string());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_FALSE(slurp(a).empty());
  EXPECT_EQ(r1.out, r2.out);
  // The JSON rows are the CSV rows: same columns, same values.
  const auto j = nlohmann::ordered_json::parse(r1.out);
  EXPECT_EQ(j["points"], 12);
  EXPECT_EQ(j["engine"], "analytic");
  ASSERT_EQ(j["grid"].size(), 3u);
  EXPECT_EQ(j["grid"][2]["key"], "cluster.nic.bandwidth_Gbps");
  const auto rows = csv_lines(slurp(a));
  std::vector<std::string> cols;
  for (const auto& c : j["columns"]) cols.push_back(c.get<std::string>());
  EXPECT_EQ(cols, rows[0]);
  ASSERT_EQ(j["rows"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    size_t c = 0;
    for (const auto& [k, v] : j["rows"][i].items()) {
      EXPECT_EQ(k, cols[c]);
      EXPECT_EQ(v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump(), rows[i + 1][c]);
      ++c;
    }
  }
  std::filesystem::remove_all(dir);
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

TEST(CliSweep, TwoMpiProcessesGiveTheSingleProcessCsv) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const auto dir = temp_dir("cli_sweep_mpi");
  const std::string one = (dir / "one.csv").string(), two = (dir / "two.csv").string();
  auto r1 = run_cli("sweep --quiet" + kBase + kGrid + " --out " + one);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  // As root OpenMPI wants --allow-run-as-root; --oversubscribe lets 2 ranks share fewer cores.
  const std::string cmd = "cd '" + dir.string() + "' && timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 '" +
                          std::string(RINGMASTER_BIN) + "' sweep --quiet --jobs 1" + kBase + kGrid + " --out " + two +
                          " > mpi.out 2> mpi.err";
  const int rc = std::system(cmd.c_str());
  const std::string err = slurp((dir / "mpi.err").string());
  if (err.find("built without MPI") != std::string::npos) GTEST_SKIP() << "ringmaster built without MPI";
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(slurp(two), slurp(one));
  // Rank 0 alone prints the table.
  const std::string out = slurp((dir / "mpi.out").string());
  size_t tables = 0;
  for (size_t at = out.find("points over"); at != std::string::npos; at = out.find("points over", at + 1)) ++tables;
  EXPECT_EQ(tables, 1u) << out;
  std::filesystem::remove_all(dir);
}

TEST(CliSweep, BadInputUnderMpiIsOneLineFromRankZeroAndNoCsv) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const auto dir = temp_dir("cli_sweep_mpi_bad");
  const std::string cmd = "cd '" + dir.string() + "' && timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 '" +
                          std::string(RINGMASTER_BIN) + "' sweep --quiet --jobs 1" + kBase +
                          " --grid parallel.cp=abc --out rows.csv > mpi.out 2> mpi.err";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  const std::string err = slurp((dir / "mpi.err").string()) + slurp((dir / "mpi.out").string());
  if (err.find("built without MPI") != std::string::npos) GTEST_SKIP() << "ringmaster built without MPI";
  size_t lines = 0;
  for (size_t at = err.find("ringmaster: error:"); at != std::string::npos; at = err.find("ringmaster: error:", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_THAT(err, HasSubstr("$.parallel.cp: expected an integer"));
  EXPECT_FALSE(std::filesystem::exists(dir / "rows.csv"));
  std::filesystem::remove_all(dir);
}

TEST(CliSweep, APointThatCannotRunIsARowWithItsError) {
  auto r = run_cli("sweep --quiet" + kBase + " --grid parallel.cp=8,4 --grid parallel.hp=1,2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("1 of 4 points cannot run"));
  EXPECT_THAT(r.out, HasSubstr("point 1: "));
  EXPECT_THAT(r.out, HasSubstr("exceeds the 8 GPUs"));
  auto j = run_cli("sweep --quiet --json" + kBase + " --grid parallel.cp=8,4 --grid parallel.hp=1,2");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto rows = nlohmann::json::parse(j.out)["rows"];
  EXPECT_TRUE(rows[1]["step_time_s"].is_null());
  EXPECT_THAT(rows[1]["error"].get<std::string>(), HasSubstr("$.parallel.cp"));
  EXPECT_TRUE(rows[3]["error"].is_null());
  EXPECT_GT(rows[3]["step_time_s"].get<double>(), 0);
}

TEST(CliSweep, BadInputIsOneLineExitTwoAndNoCsv) {
  const auto dir = temp_dir("cli_sweep_bad");
  const std::string csv = (dir / "rows.csv").string();
  const std::string kept = (dir / "kept.csv").string();
  std::ofstream(kept) << "old\n";
  struct Case {
    std::string args, want;
  };
  const std::vector<Case> cases = {
      {" --grid parallel.nonsense=1,2", "parallel.nonsense"},
      {" --grid parallel.nonsense=1,2", "unknown key"},
      {" --grid parallel.partition=zigzag,stripe --grid parallel.window=two", "--grid parallel.window=two"},
      {" --grid parallel.partition=zigzag,stripe --grid parallel.window=two", "expected an integer"},
      {" --grid cluster.nic.bandwidth_Gbps=200,fast", "value \"fast\""},
      {"", "at least one --grid"},
      {" --grid parallel.cp=", "--grid parallel.cp=: empty value"},
      {" --grid parallel.cp", "expected KEY=V1,V2"},
      {" --grid parallel.cp=2,4 --engine fast", "--engine"},
      {" --grid parallel.cp=2,4 --jobs -1", "--jobs"},
  };
  for (const auto& c : cases) {
    for (const std::string& out : {csv, kept}) {
      auto r = run_cli("sweep" + kBase + c.args + " --out " + out);
      EXPECT_EQ(r.exit_code, 2) << c.args;
      EXPECT_THAT(r.err, HasSubstr(c.want)) << c.args;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr("ringmaster: error: ")) << c.args;
      EXPECT_EQ(r.out, "") << c.args;
    }
    EXPECT_FALSE(std::filesystem::exists(csv)) << c.args;
    EXPECT_EQ(slurp(kept), "old\n") << c.args;
  }
  std::filesystem::remove_all(dir);
}

TEST(CliSweep, OutDashPrintsTheCsvInsteadOfTheTable) {
  const auto dir = temp_dir("cli_sweep_dash");
  const std::string csv = (dir / "rows.csv").string();
  auto file = run_cli("sweep --quiet" + kBase + " --grid parallel.partition=zigzag,stripe --out " + csv);
  auto dash = run_cli("sweep --quiet" + kBase + " --grid parallel.partition=zigzag,stripe --out -");
  ASSERT_EQ(file.exit_code, 0) << file.err;
  ASSERT_EQ(dash.exit_code, 0) << dash.err;
  EXPECT_EQ(dash.out, slurp(csv));
  auto both = run_cli("sweep --quiet --json" + kBase + " --grid parallel.partition=zigzag,stripe --out -");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("--out -: standard output already carries the --json document"));
  EXPECT_EQ(both.out, "");
  std::filesystem::remove_all(dir);
}

TEST(CliSweep, HelpNamesTheOptions) {
  auto r = run_cli("sweep --help");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* o : {"--grid", "--set", "--engine", "--out", "--json", "--jobs", "--quiet"})
    EXPECT_THAT(r.out, HasSubstr(o)) << o;
}

}  // namespace
}  // namespace rm::test
