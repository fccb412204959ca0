// What every command shares on the command line: options that take one value
// per flag and never the positional experiment, config folders that must
// exist, config errors that exit 2 on one line, --help and --version.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kCommands{"imbalance", "plan", "schedule", "simulate", "sweep"};
// A command as the tests below run it: sweep needs a grid.
std::string invoke(const std::string& cmd) { return cmd == "sweep" ? cmd + " --grid parallel.partition=zigzag,stripe" : cmd; }
// Commands that take no experiment (they read other commands' outputs or recorded traces): --json, no --configs.
const std::vector<std::string> kFileCommands{"calibrate", "compare", "diff", "replay"};
// Commands that read a framework's settings over an experiment (--json and --configs; they need those settings).
const std::vector<std::string> kImportCommands{"import"};
// Commands that write an experiment from flags (no experiment in, --configs for the names they take).
const std::vector<std::string> kStartCommands{"init"};

// A config folder holding a small experiment "tiny" (2 layers, 16K tokens on
// one 8-GPU node, attention forward), so a run that silently fell back to the
// embedded default (32 GPUs, 512K tokens) shows in the echoed name.
struct TinyConfigs {
  std::filesystem::path dir = temp_dir("rm_cli_tiny");
  TinyConfigs() {
    std::filesystem::create_directories(dir / "experiments");
    std::filesystem::create_directories(dir / "models");
    auto model = nlohmann::json::parse(slurp(std::string(RINGMASTER_SOURCE_DIR) + "/configs/models/qwen2.5-3b.json"));
    model["name"] = "tiny-model";
    model["layers"] = 2;
    std::ofstream(dir / "models" / "tiny-model.json") << model.dump();
    std::ofstream(dir / "experiments" / "tiny.json") << R"({"name": "tiny", "cluster": "h200-1x8",
      "model": "tiny-model", "workload": {"seq_len": "16k", "pattern": "dense-causal"},
      "parallel": {"cp": 8, "partition": "zigzag", "ring": "ring"}, "scope": "attention_fwd"})";
  }
  ~TinyConfigs() { std::filesystem::remove_all(dir); }
};

std::string experiment_name(const std::string& out) {
  const auto j = nlohmann::json::parse(out);
  return j.at("experiment").at("name").get<std::string>();
}

TEST(CliOptions, NoOptionSwallowsThePositionalExperiment) {
  const TinyConfigs c;
  const std::string D = " --configs '" + c.dir.string() + "'";
  for (const auto& cmd : kCommands) {
    std::vector<std::string> forms{invoke(cmd) + " --json" + D + " --configs '" + RINGMASTER_SOURCE_DIR + "/configs' tiny",
                                   invoke(cmd) + " --json --set workload.seq_len=8k" + D + " --set parallel.cp=4 tiny"};
    if (cmd == "imbalance") forms.push_back(cmd + " --json" + D + " --partition zigzag tiny");
    for (const auto& args : forms) {
      const auto r = run_cli(args);
      ASSERT_EQ(r.exit_code, 0) << args << ": " << r.err;
      EXPECT_EQ(experiment_name(r.out), "tiny") << args;
    }
  }
}

TEST(CliOptions, AnOptionTakesOneValuePerFlag) {
  const TinyConfigs c;
  // The second value is the positional experiment, so the third is one argument too many.
  for (const auto& cmd : kCommands) {
    for (const std::string& args :
         {invoke(cmd) + " --configs '" + c.dir.string() + "' tiny tiny", invoke(cmd) + " --set scope=layer tiny tiny"}) {
      const auto r = run_cli(args);
      EXPECT_EQ(r.exit_code, 2) << args;
      EXPECT_THAT(r.err, HasSubstr("tiny")) << args;
      EXPECT_EQ(r.out, "") << args;
    }
  }
}

TEST(CliOptions, AMissingConfigFolderIsAConfigError) {
  for (const auto& cmd : kCommands) {
    const auto r = run_cli(invoke(cmd) + " --configs /no/such/rm-folder");
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_THAT(r.err, HasSubstr("\"/no/such/rm-folder\"")) << cmd;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << ": " << r.err;
    EXPECT_EQ(r.out, "") << cmd;
  }
}

TEST(CliOptions, ALayoutTheConfigForbidsExitsTwo) {
  const auto r = run_cli("simulate --set parallel.ring=double_ring --set parallel.window=3");  // cp = 32
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("$.parallel.window"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Layout errors are raised as config errors where the layout is built.
TEST(CliOptions, AnUnevenHierarchicalRingIsAConfigError) {
  // 12 context ranks on 8-GPU nodes: 8 on one node and 4 on the next.
  const auto r = run_cli("simulate --set parallel.ring=hierarchical --set parallel.cp=12 --set workload.seq_len=36864"
                         " --set workload.pattern=dense-causal --set scope=attention_fwd");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("$.parallel"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(CliOptions, HelpListsCommandsThatRunAndEachHasJson) {
  const auto top = run_cli("--help");
  ASSERT_EQ(top.exit_code, 0);
  const auto at = top.out.find("Subcommands:");
  ASSERT_NE(at, std::string::npos) << top.out;
  std::vector<std::string> listed;
  const std::regex line(R"(\n  (\S+) )");
  for (std::sregex_iterator it(top.out.begin() + long(at), top.out.end(), line), end; it != end; ++it)
    listed.push_back((*it)[1]);
  std::vector<std::string> all = kCommands;
  all.insert(all.end(), kFileCommands.begin(), kFileCommands.end());
  all.insert(all.end(), kImportCommands.begin(), kImportCommands.end());
  all.insert(all.end(), kStartCommands.begin(), kStartCommands.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(listed, all);
  for (const auto& cmd : listed) {
    const auto r = run_cli(cmd + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_THAT(r.out, HasSubstr("--json")) << cmd;
    if (std::find(kFileCommands.begin(), kFileCommands.end(), cmd) == kFileCommands.end()) {
      EXPECT_THAT(r.out, HasSubstr("--configs")) << cmd;
    }
  }
}

TEST(CliOptions, UsageErrorsAreOneLineAndExitTwo) {
  for (const char* args : {"", "no-such-command", "simulate --no-such-flag", "simulate --engine", "imbalance a b"}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(CliOptions, VersionIsTheProjectVersionAndAGitRevision) {
  const auto r = run_cli("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(r.out, m, std::regex(R"(ringmaster (\S+) \(git ([0-9a-f]{12}(-dirty)?|unknown)\)\n)")))
      << r.out;
  EXPECT_EQ(m[1], RINGMASTER_VERSION);
}

}  // namespace
}  // namespace rm::test
