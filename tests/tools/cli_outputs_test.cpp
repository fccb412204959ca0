// The CLI's outputs and exit status (issue 41; README.md, "Exit status"):
// every output flag of every command refuses a destination that cannot be
// written with exit 2 before any work; reports are written by length (a NUL
// in a name is printed, never a cut); numbers and variables out of range are
// named as typed.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using rm::test::run_cli;
namespace fs = std::filesystem;

const std::string kCompare = std::string(RINGMASTER_SOURCE_DIR) + "/tests/data/compare/";
const std::string kCalibrate = std::string(RINGMASTER_SOURCE_DIR) + "/tests/data/calibrate";

class CliOutputs : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = rm::test::temp_dir("cli_outputs"); }
  void TearDown() override { fs::remove_all(dir_); }
  size_t entries(const fs::path& d) const {
    return size_t(std::distance(fs::directory_iterator(d), fs::directory_iterator()));
  }
  fs::path dir_;
};

// Every command with each flag that names a file it writes; the rest of each
// command line is valid, so only the destination can be refused.
struct OutputFlag {
  std::string command;  // up to the flag
  std::string flag;
};
const std::vector<OutputFlag> kOutputFlags = {
    {"simulate runtime-tiny-ring", "--trace"},
    {"schedule runtime-tiny-ring", "-o"},
    {"schedule runtime-tiny-ring", "--out"},
    {"sweep runtime-tiny-ring --grid workload.seq_len=4k", "--out"},
    {"imbalance runtime-tiny-ring", "--csv"},
    {"plan runtime-tiny-ring --engine-confirm none --gpus 4", "--export"},
    {"compare --predicted " + kCompare + "tiny-ring-predicted.json.gz --measured " + kCompare +
         "tiny-ring-measured.json.gz",
     "--csv"},
    {"compare --predicted " + kCompare + "tiny-ring-predicted.json.gz --measured " + kCompare +
         "tiny-ring-measured.json.gz",
     "--trace"},
    {"replay no-such-kineto-trace.json", "--trace"},
    {"calibrate --runs " + kCalibrate + " --out cal.json", "--kernel-out"},
    {"calibrate --runs " + kCalibrate + " --out cal.json", "--residuals"},
    {"calibrate --runs " + kCalibrate, "--out"},
    {"simulate runtime-tiny-ring --emit experiment", "--emit-file"},
    {"plan runtime-tiny-ring --engine-confirm none --gpus 4 --emit megatron", "-o"},
    {"import megatron --args '--num-layers 2'", "-o"},
    {"init job --model llama3-8b --cluster h100-8x8-ndr --seq-len 128k", "-o"},
};

TEST_F(CliOutputs, EveryOutputFlagRefusesADestinationThatCannotBeWrittenWithExit2) {
  fs::create_directory(dir_ / "folder");
  struct Destination {
    std::string arg, says;
  };
  const std::vector<Destination> destinations = {
      {"folder", "folder: is a directory, expected a file"},
      {"missing/out.json", "missing/out.json: the folder missing does not exist"},
      {"''", "an empty output path"},
  };
  for (const OutputFlag& f : kOutputFlags)
    for (const Destination& d : destinations) {
      const std::string args = f.command + " " + f.flag + " " + d.arg;
      const auto r = run_cli(args, dir_.string());
      EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
      EXPECT_THAT(r.err, HasSubstr(d.says)) << args;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
      EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
      EXPECT_EQ(entries(dir_), 1u) << args << ": wrote beside the destination";
      EXPECT_EQ(entries(dir_ / "folder"), 0u) << args;
    }
  // diff writes no file: its report goes to standard output, held to the same rule below.
}

TEST_F(CliOutputs, AWriteThatFailsLateIsExit2Too) {
  // A FIFO no process reads passes the early check but cannot be written: refused, not waited on.
  ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  for (const std::string args : {"schedule runtime-tiny-ring -o pipe", "simulate runtime-tiny-ring --trace pipe"}) {
    const auto r = run_cli(args, dir_.string());
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("pipe: a FIFO that no process reads")) << args;
  }
  // A full standard output: every command's report.
  const auto sim = run_cli("simulate runtime-tiny-ring --json > sim.json", dir_.string());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const std::vector<std::string> reports = {
      "simulate runtime-tiny-ring", "schedule runtime-tiny-ring --json", "diff sim.json sim.json",
      "compare --predicted " + kCompare + "tiny-ring-predicted.json.gz --measured " + kCompare +
          "tiny-ring-measured.json.gz"};
  for (const std::string& args : reports) {
    const auto r = run_cli(args + " > /dev/full", dir_.string());
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("standard output: cannot write")) << args;
  }
}

TEST_F(CliOutputs, ANulInANameIsPrintedNotACut) {
  const std::string nul_name("a\0b", 3);
  for (const std::string command : {"simulate", "schedule", "imbalance", "plan --engine-confirm none"}) {
    const auto r = run_cli(command + " runtime-tiny-ring --set 'name=\"a\\u0000b\"'", dir_.string());
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.err;
    EXPECT_THAT(r.out, HasSubstr("experiment " + nul_name)) << command;
    EXPECT_GT(r.out.size(), 200u) << command;  // the whole report, not the 12 bytes before the NUL
  }
  // A trace event's name, in compare's table of the ops that differ most.
  ASSERT_EQ(run_cli("simulate runtime-tiny-ring --trace predicted.json", dir_.string()).exit_code, 0);
  nlohmann::json t = nlohmann::json::parse(rm::test::slurp((dir_ / "predicted.json").string()));
  for (auto& e : t["traceEvents"])
    if (e.value("ph", "") == "X") e["name"] = e["name"].get<std::string>() + std::string("\0x", 2);
  std::ofstream(dir_ / "measured.json") << t.dump();
  const auto r = run_cli("compare --predicted predicted.json --measured measured.json", dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(std::count(r.out.begin(), r.out.end(), '\0'), 2) << r.out;  // every name, not a cut at the first
}

TEST_F(CliOutputs, NumbersOutOfRangeAreNamedAsTyped) {
  const auto big = run_cli("simulate runtime-tiny-ring --set workload.seq_len=9223372036854775808", dir_.string());
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_THAT(big.err, HasSubstr("workload.seq_len: expected a size in"));
  EXPECT_THAT(big.err, HasSubstr("got 9223372036854775808"));
  EXPECT_THAT(big.err, Not(HasSubstr("-9223372036854775808")));
  const auto cp = run_cli("simulate runtime-tiny-ring --set parallel.cp=9223372036854775808", dir_.string());
  EXPECT_EQ(cp.exit_code, 2);
  EXPECT_THAT(cp.err, HasSubstr("$.parallel.cp: expected an integer in [1, 1048576], got 9223372036854775808"));
  for (const char* bad : {"-5", "0", "5x", "lots"}) {
    ::setenv("RINGMASTER_MEMORY_BYTES", bad, 1);
    const auto r = run_cli("simulate runtime-tiny-ring", dir_.string());
    ::unsetenv("RINGMASTER_MEMORY_BYTES");
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr(std::string("RINGMASTER_MEMORY_BYTES: expected a positive number of bytes like "
                                             "68719476736 or 64G, got \"") + bad + "\""));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
