// `ringmaster compare` through the real CLI on the committed tiny run
// (tests/data/compare/README.md): the table, --json, --csv and --trace, both
// ways in (a predicted Timeline file, or the Schedule simulated here), and
// bad input: one line naming the file, exit 2, no output file.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kData = std::string(RINGMASTER_SOURCE_DIR) + "/tests/data/compare/";
const std::string kSchedule = kData + "tiny-ring.json.gz";
const std::string kMeasured = kData + "tiny-ring-measured.json.gz";
const std::string kPredicted = kData + "tiny-ring-predicted.json.gz";
const std::string kPair = " --predicted " + kPredicted + " --measured " + kMeasured;

// Quoted for the shell (appended piecewise: GCC 12 warns falsely on "'" + string).
std::string q(const std::filesystem::path& p) {
  std::string s(1, '\'');
  s += p.string();
  s += '\'';
  return s;
}

TEST(CliCompare, PrintsTheStepErrorTablesAndTopContributors) {
  const auto r = run_cli("compare" + kPair);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"step time: predicted ", "MAPE over ", "op kind", "attn_fwd", "ring step", "layer", "rank",
                        "top contributors to the step error (measured critical path"})
    EXPECT_THAT(r.out, HasSubstr(s));
  EXPECT_EQ(run_cli("compare --help").exit_code, 0);
}

TEST(CliCompare, JsonFromAFileAndFromTheScheduleAgree) {
  const auto a = run_cli("compare --json" + kPair);
  const auto b = run_cli("compare --json --schedule " + kSchedule + " --measured " + kMeasured);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  for (const char* k : {"step", "mape", "ops", "by_kind", "by_phase", "by_rank", "by_step", "by_layer",
                        "top_contributors"})
    EXPECT_TRUE(ja.contains(k)) << k;
  // The committed predicted Timeline is `simulate --schedule` of the same file: the same figures.
  EXPECT_NEAR(ja["step"]["predicted_s"].get<double>(), jb["step"]["predicted_s"].get<double>(), 1e-12);
  EXPECT_EQ(ja["ops"]["joined"], jb["ops"]["joined"]);
  EXPECT_EQ(ja["ops"]["predicted_only"], 0);
  EXPECT_EQ(ja["ops"]["measured_only"], 0);
  EXPECT_EQ(ja["by_kind"], jb["by_kind"]);
  // Without the Schedule the critical path reads kinds from the events: the same path and list.
  EXPECT_EQ(ja["top_contributors"], jb["top_contributors"]);
  EXPECT_EQ(ja["top_contributors"]["basis"], "measured critical path");
  // The measured step is the median iteration the run recorded.
  EXPECT_GT(ja["step"]["measured_s"].get<double>(), 0);
  EXPECT_GE(ja["mape"]["mean"].get<double>(), 0);
  // A cost what-if (a slower kernel launch) moves the prediction, not the measurement.
  const auto c = run_cli("compare --json --schedule " + kSchedule + " --measured " + kMeasured +
                         " --set cluster.cost.kernel_launch_us=1000");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const auto jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(jc["step"]["measured_s"], jb["step"]["measured_s"]);
  EXPECT_GT(jc["step"]["predicted_s"].get<double>(), jb["step"]["predicted_s"].get<double>() + 1e-3);
}

TEST(CliCompare, WritesACsvRowPerJoinedOpAndOneTraceWithBothSides) {
  const auto dir = temp_dir("cli_compare");
  const auto csv = dir / "ops.csv", trace = dir / "both.json";
  const auto r = run_cli("compare --json" + kPair + " --csv " + q(csv) + " --trace " + q(trace));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::istringstream in(slurp(csv.string()));
  std::string line;
  std::getline(in, line);
  EXPECT_THAT(line, StartsWith("op,rank,stream,kind,layer,step,phase,predicted_start_s"));
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, j["ops"]["joined"].get<int>());

  // The trace is valid JSON with a predicted and a measured process per rank, and every op on both.
  const auto t = nlohmann::json::parse(slurp(trace.string()));
  std::map<int, std::string> names;
  int slices = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") ++slices;
  }
  ASSERT_EQ(names.size(), 4u);
  EXPECT_THAT(names.at(0), StartsWith("predicted rank 0"));
  EXPECT_THAT(names.at(1), StartsWith("predicted rank 1"));
  EXPECT_THAT(names.at(100), StartsWith("measured rank 0"));
  EXPECT_THAT(names.at(101), StartsWith("measured rank 1"));
  EXPECT_EQ(slices, 2 * j["ops"]["joined"].get<int>());
  EXPECT_EQ(t["otherData"]["metadata"]["side_by_side"]["measured_pid_offset"], 100);
  std::filesystem::remove_all(dir);
}

struct Bad {
  std::string args, message;
};

TEST(CliCompare, BadInputIsOneLineNamingTheFileExit2AndNoOutput) {
  const auto dir = temp_dir("cli_compare_bad");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string truncated = write("truncated.json", "{\"traceEvents\":[{\"ph\":\"X\",");
  const std::string empty = write("empty.json",
                                  "{\"traceEvents\":[],\"otherData\":{\"format\":\"ringmaster.timeline\",\"version\":1,"
                                  "\"source\":\"runtime-cpu\",\"metadata\":{}}}");
  // The measured run with another hash, and as another job (rank 1's events moved to rank 3).
  const std::string other_hash_path = (dir / "other-hash.json").string();
  {
    const std::string cmd = "gunzip -c '" + kMeasured + "' > '" + (dir / "m.json").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    auto m = nlohmann::json::parse(slurp((dir / "m.json").string()));
    m["otherData"]["metadata"]["schedule_hash"] = "0000000000000000";
    std::ofstream(other_hash_path) << m.dump();
    for (auto& e : m["traceEvents"])
      if (e.contains("pid") && e["pid"] == 1) e["pid"] = 3;
    m["otherData"]["metadata"].erase("schedule_hash");
    std::ofstream(dir / "other-ranks.json") << m.dump();
    // Issue 41: op 4 on a second event; an edge naming an op the Schedule lacks.
    auto twice = nlohmann::json::parse(slurp((dir / "m.json").string()));
    for (const auto& e : twice["traceEvents"])
      if (e.contains("args") && e["args"].value("op", -1) == 4) {
        twice["traceEvents"].push_back(e);
        break;
      }
    std::ofstream(dir / "op-twice.json") << twice.dump();
    auto edge = nlohmann::json::parse(slurp((dir / "m.json").string()));
    edge["otherData"]["edges"].push_back({3, 999999, "dependency"});
    std::ofstream(dir / "edge-elsewhere.json") << edge.dump();
  }
  const std::string out = (dir / "out.csv").string();
  const std::vector<Bad> cases = {
      {"--predicted " + truncated + " --measured " + kMeasured, truncated},
      {"--predicted " + kPredicted + " --measured " + empty, empty + ": no events"},
      {"--predicted " + kPredicted + " --measured " + (dir / "missing.json").string(), "missing.json"},
      {"--predicted " + kPredicted + " --measured " + other_hash_path, other_hash_path + ": schedule_hash 0000000000000000, but "},
      {"--schedule " + kSchedule + " --measured " + other_hash_path, "hashes to"},
      {"--predicted " + kPredicted + " --measured " + (dir / "other-ranks.json").string(), "not the same job"},
      {"--schedule " + kSchedule + " --measured " + (dir / "other-ranks.json").string(), "not the same job"},
      {"--schedule " + kSchedule + " --measured " + (dir / "op-twice.json").string(),
       (dir / "op-twice.json").string() + ": events "},
      {"--schedule " + kSchedule + " --measured " + (dir / "op-twice.json").string(), " both carry op 4 "},
      {"--schedule " + kSchedule + " --measured " + (dir / "edge-elsewhere.json").string(),
       (dir / "edge-elsewhere.json").string() + ": otherData.edges[58] names op 999999, but " + kSchedule + " has ops 0..27"},
      {"--measured " + kMeasured, "give either --predicted"},
      {"--predicted " + kPredicted + " --schedule " + kSchedule + " --measured " + kMeasured, "give either --predicted"},
      {"--predicted " + kPredicted + " --measured " + kMeasured + " --engine simgrid", "go with --schedule"},
      {"--schedule " + kSchedule + " --measured " + kMeasured + " --engine nope", "--engine"},
      {"--schedule " + kSchedule + " --measured " + kMeasured + " --set workload.seq_len=8k", "--set: changes what"},
  };
  for (const Bad& b : cases) {
    const auto r = run_cli("compare " + b.args + " --csv " + q(out) + " --trace " + q(dir / "out.json"));
    EXPECT_EQ(r.exit_code, 2) << b.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(b.message)) << b.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << b.args;
    EXPECT_FALSE(std::filesystem::exists(out)) << b.args;
    EXPECT_FALSE(std::filesystem::exists(dir / "out.json")) << b.args;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rm::test
