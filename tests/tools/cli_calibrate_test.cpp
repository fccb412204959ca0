// `ringmaster calibrate` through the real CLI on the committed runs of
// tests/data/calibrate/ (Schedules measured by ringmaster-run on the 2-core
// machine): it fits, writes a cluster and kernel JSON that `simulate` takes,
// the residuals CSV and a deterministic held-out report; bad input (a
// Timeline of another Schedule, a missing op, truncated JSON, no runs) is one
// line, exit 2 and no output file.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kData = std::string(RINGMASTER_SOURCE_DIR) + "/tests/data/calibrate";

fs::path fresh(const std::string& name) {
  const fs::path d = temp_dir("cli_calibrate") / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(CliCalibrate, HelpNamesTheOptions) {
  const auto r = run_cli("calibrate --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--run", "--runs", "--cluster", "--out", "--kernel-out", "--residuals", "--holdout", "--seed", "--json"})
    EXPECT_THAT(r.out, HasSubstr(flag));
}

TEST(CliCalibrate, FitsTheCommittedRunsAndSimulateTakesTheResult) {
  const fs::path d = fresh("fit");
  const std::string out = (d / "c.json").string(), kernel = (d / "c.kernel.json").string(), csv = (d / "r.csv").string();
  const auto r = run_cli("calibrate --runs '" + kData + "' --out '" + out + "' --residuals '" + csv + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("cluster"), "cpu-2core-1x2");
  EXPECT_LT(j.at("fit").at("rms_log_after").get<double>(), j.at("fit").at("rms_log_before").get<double>());
  bool launch = false, unexercised = false;
  for (const auto& p : j.at("parameters")) {
    launch = launch || (p.at("name") == "cost.kernel_launch_us" && p.at("exercised").get<bool>());
    if (!p.at("exercised").get<bool>() && !p.at("scaled").get<bool>()) {
      unexercised = true;
      EXPECT_EQ(p.at("fitted"), p.at("base")) << p.at("name");
    }
  }
  EXPECT_TRUE(launch);
  EXPECT_TRUE(unexercised);  // one node: no NIC is crossed
  // The CSV: a header and one row per observation.
  EXPECT_EQ(lines(slurp(csv)), 1 + j.at("fit").at("observations").get<int>());
  // The pair loads: simulate with the calibrated cluster and kernel.
  const auto base = run_cli("simulate runtime-tiny-ring --json");
  const auto cal = run_cli("simulate runtime-tiny-ring --set cluster='" + out + "' --set kernel.attention='" + kernel + "' --json");
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  EXPECT_NE(nlohmann::json::parse(cal.out).at("step_time_s"), nlohmann::json::parse(base.out).at("step_time_s"));
  // The human table says the same.
  const auto t = run_cli("calibrate --runs '" + kData + "' --out '" + out + "'");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("cost.kernel_launch_us"));
  EXPECT_THAT(t.out, HasSubstr("stay as they were"));
}

TEST(CliCalibrate, HoldoutIsDeterministicBySeed) {
  const fs::path d = fresh("holdout");
  const std::string args = "calibrate --runs '" + kData + "' --out '" + (d / "c.json").string() + "' --holdout 0.5 --json";
  const auto a = run_cli(args + " --seed 3"), b = run_cli(args + " --seed 3");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const auto j = nlohmann::json::parse(a.out);
  const size_t held = j.at("runs").at("held_out").size(), fitted = j.at("runs").at("fitted").size();
  EXPECT_GE(held, 1u);
  EXPECT_EQ(j.at("holdout").at("steps").size(), held);
  EXPECT_EQ(held + fitted, 4u);
  for (const auto& s : j.at("holdout").at("steps")) {
    EXPECT_GT(s.at("measured_s").get<double>(), 0);
    EXPECT_GT(s.at("predicted_after_s").get<double>(), 0);
  }
  EXPECT_TRUE(j.at("holdout").contains("step_mape_after"));
}

// Copies the committed pair `name` into d, applying `edit` to the measured JSON.
std::string pair_with(const fs::path& d, const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  fs::copy_file(kData + "/" + name + ".schedule.json.gz", d / (name + ".schedule.json.gz"));
  auto j = nlohmann::json::parse(slurp(kData + "/" + name + ".measured.json"));
  edit(j);
  std::ofstream(d / (name + ".measured.json")) << j.dump();
  return (d / (name + ".schedule.json.gz")).string() + "=" + (d / (name + ".measured.json")).string();
}

void expect_refused(const std::string& args, const fs::path& d, const std::string& what) {
  const auto r = run_cli(args + " --out '" + (d / "out.json").string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(what));
  EXPECT_FALSE(fs::exists(d / "out.json"));
  EXPECT_FALSE(fs::exists(d / "out.kernel.json"));
}

TEST(CliCalibrate, BadInputIsOneLineExitTwoAndNoOutput) {
  const std::string name = "ring-zigzag-2k";
  {
    const fs::path d = fresh("hash");
    const std::string run = pair_with(d, name, [](nlohmann::json& j) { j["otherData"]["metadata"]["schedule_hash"] = "0000000000000000"; });
    expect_refused("calibrate --run '" + run + "'", d, "schedule_hash is 0000000000000000");
  }
  {
    const fs::path d = fresh("missing_op");
    const std::string run = pair_with(d, name, [](nlohmann::json& j) {
      auto& ev = j["traceEvents"];
      for (auto it = ev.begin(); it != ev.end(); ++it)
        if (it->contains("args") && (*it)["args"].contains("op") && (*it)["args"]["op"] == 3) {
          ev.erase(it);
          break;
        }
    });
    expect_refused("calibrate --run '" + run + "'", d, "op 3");
  }
  {
    const fs::path d = fresh("truncated");
    fs::copy_file(kData + "/" + name + ".schedule.json.gz", d / "s.json.gz");
    const std::string text = slurp(kData + "/" + name + ".measured.json");
    std::ofstream(d / "m.json") << text.substr(0, text.size() / 2);
    expect_refused("calibrate --run '" + (d / "s.json.gz").string() + "=" + (d / "m.json").string() + "'", d, "m.json");
  }
  {
    // A PyTorch profiler trace given as the measured Timeline: named for what it is.
    const fs::path d = fresh("kineto");
    fs::copy_file(kData + "/" + name + ".schedule.json.gz", d / "s.json.gz");
    std::ofstream(d / "rank0.json") << R"({"schemaVersion": 1, "deviceProperties": [], "traceEvents": [)"
                                       R"({"ph": "X", "cat": "kernel", "name": "flash_fwd", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]})";
    expect_refused("calibrate --run '" + (d / "s.json.gz").string() + "=" + (d / "rank0.json").string() + "'", d,
                   "this is a PyTorch profiler (Kineto) trace");
  }
  {
    const fs::path d = fresh("none");
    expect_refused("calibrate", d, "no runs");
    expect_refused("calibrate --run nothing-here", d, "expected SCHEDULE=MEASURED");
    expect_refused("calibrate --runs '" + d.string() + "'", d, "no NAME.schedule.json");
    expect_refused("calibrate --runs '" + kData + "' --holdout 1", d, "--holdout");
  }
}

}  // namespace
}  // namespace rm::test
