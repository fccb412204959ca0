// The CLI on the untrusted inputs of issue 13: each answer is one line naming
// the file and the field, exit code 2, nothing on stdout; outputs that are not
// regular files are written in place, never replaced.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace {

using ::testing::HasSubstr;
using rm::test::run_cli;
using rm::test::slurp;
namespace fs = std::filesystem;

class CliUntrusted : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(rm::test::temp_dir("cli_untrusted"));
    const auto r = run_cli("schedule runtime-tiny-ring -o good.json", dir_->string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static nlohmann::json good() { return nlohmann::json::parse(slurp((*dir_ / "good.json").string())); }
  static std::string write(const std::string& name, const std::string& text) {
    std::ofstream((*dir_ / name).string(), std::ios::binary) << text;
    return name;
  }
  // Runs the CLI in the folder; expects the one-line refusal with exit code 2.
  static std::string refused(const std::string& args) { return rm::test::expect_one_line_refusal(args, dir_->string()); }
  static fs::path* dir_;
};
fs::path* CliUntrusted::dir_ = nullptr;

TEST_F(CliUntrusted, DeepNestingIsRefusedNotACrash) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(100000, '}');
  EXPECT_THAT(refused("simulate " + write("deep.json", deep)), HasSubstr("deep.json: nested deeper than 256 levels"));
  std::string s = good().dump();
  s.insert(s.size() - 1, ",\"zz\":" + std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_THAT(refused("simulate --schedule " + write("deep_s.json", s)), HasSubstr("deep_s.json: nested deeper than"));
}

TEST_F(CliUntrusted, AParallelProductOverflowingIntIsRefusedByEveryCommand) {
  const std::string sets = " --set parallel.dp=65536 --set parallel.cp=65536 --set parallel.partition=zigzag "
                           "--set parallel.ring=ring";
  for (const std::string cmd : {"schedule -o x.json", "simulate", "imbalance"})
    EXPECT_THAT(refused(cmd + sets), HasSubstr("$.parallel.cp: dp*hp*cp = 65536*1*65536 = 4294967296 exceeds"))
        << cmd;
  EXPECT_FALSE(fs::exists(*dir_ / "x.json"));
}

TEST_F(CliUntrusted, ASchedulesTextObeysTheJsonLimits) {
  std::string s = good().dump();
  const std::string dup = s.substr(0, s.size() - 1) + ",\"op_count\":1}";
  EXPECT_THAT(refused("simulate --schedule " + write("dup.json", dup)),
              HasSubstr("dup.json: key \"op_count\" appears twice in one object"));
  std::string big = s;
  big.replace(big.find("\"op_count\":"), 11, "\"x\":1e999,\"op_count\":");
  EXPECT_THAT(refused("simulate --schedule " + write("big.json", big)), HasSubstr("big.json: a number is out of range"));
  fs::create_directories(*dir_ / "adir");
  EXPECT_THAT(refused("simulate --schedule adir"), HasSubstr("adir: is a directory, expected a file"));
  const std::string gz = (*dir_ / "good.json.gz").string();
  ASSERT_EQ(run_cli("schedule runtime-tiny-ring -o good.json.gz", dir_->string()).exit_code, 0);
  std::ofstream(gz, std::ios::app | std::ios::binary) << "junk";
  EXPECT_THAT(refused("simulate --schedule good.json.gz"), HasSubstr("4 bytes after the end of the gzip stream"));
}

TEST_F(CliUntrusted, AScheduleMustFitItsCluster) {
  auto j = good();
  j["ranks"][0]["gpu"] = 2147483647;  // once an out-of-bounds read in the analytic engine
  EXPECT_THAT(refused("simulate --schedule " + write("far.json", j.dump())),
              HasSubstr("far.json: ranks[0].gpu: GPU 2147483647 is outside cluster cpu-2core-1x2 (GPUs 0..1)"));
  j = good();
  j["ranks"][1]["gpu"] = j["ranks"][0]["gpu"];
  EXPECT_THAT(refused("simulate --schedule " + write("shared.json", j.dump())),
              HasSubstr("shared.json: ranks[1].gpu: GPU 0 already holds rank 0"));
  j = good();
  j["experiment"]["cluster"] = "cpu-16core-1x4";
  j["ranks"].push_back({{"gpu", 2}, {"streams", nlohmann::json::array()}});  // a rank with no ops
  EXPECT_THAT(refused("simulate --schedule " + write("extra.json", j.dump())),
              HasSubstr("extra.json: the Schedule has 3 ranks, its experiment dp*tp*hp*cp = 1*1*1*2 = 2"));
}

TEST_F(CliUntrusted, AScheduleMustAgreeWithItsExperiment) {
  auto j = good();
  j["experiment"]["workload"]["seq_len"] = "4G";  // once tokens/s 8.7e9
  EXPECT_THAT(refused("simulate --schedule " + write("long.json", j.dump())),
              HasSubstr("long.json: the Schedule's token sets cover tokens 0..4095, but its experiment's "
                        "$.workload.seq_len is 4294967296"));
  j = good();
  j["experiment"]["workload"]["pattern"] = {{"kind", "nonsense"}};
  EXPECT_THAT(refused("simulate --schedule " + write("pattern.json", j.dump())),
              HasSubstr("pattern.json (its experiment) ($.workload.pattern): $.kind: expected one of"));
  j = good();
  j["templates"][0]["flops"] = 1e308;
  EXPECT_THAT(refused("simulate --schedule " + write("flops.json", j.dump())),
              HasSubstr("flops.json: $.templates[0].flops: expected a number in [0, 1e+24], got 1e+308"));
}

TEST_F(CliUntrusted, AnOpCountTheFileDoesNotBackIsRefusedBeforeAllocating) {
  auto j = good();
  const int ops = j["op_count"];
  j["op_count"] = 30000000;  // in a 10 KB file: once 3.3 GB allocated before failing
  EXPECT_THAT(refused("simulate --schedule " + write("many.json", j.dump())),
              HasSubstr("op " + std::to_string(ops) + ": missing (no segment covers it; op_count is 30000000)"));
}

TEST_F(CliUntrusted, AScheduleTooLargeForTheMachineIsRefusedWithTheEstimate) {
  ::setenv("RINGMASTER_MEMORY_BYTES", "1000", 1);
  const std::string said = refused("simulate --schedule good.json");
  ::unsetenv("RINGMASTER_MEMORY_BYTES");
  EXPECT_THAT(said, HasSubstr("good.json: this Schedule needs ~0.1 GB (28 ops), this machine has 0.0 GB"));
}

TEST_F(CliUntrusted, OutputsThatAreNotRegularFilesAreWrittenInPlace) {
  const fs::path fifo = *dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reader is open before the CLI starts (a FIFO no process reads is refused); a
  // second writer of ours keeps its reads from ending early, and closing it ends them.
  const int read_end = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(read_end, 0);
  const int keeper = ::open(fifo.c_str(), O_WRONLY);
  ASSERT_GE(keeper, 0);
  ASSERT_EQ(::fcntl(read_end, F_SETFL, 0), 0);
  std::string through;
  std::thread reader([&] {
    char buf[1 << 16];
    ssize_t n;
    while ((n = ::read(read_end, buf, sizeof buf)) > 0) through.append(buf, size_t(n));
  });
  const auto r = run_cli("schedule runtime-tiny-ring -o pipe", dir_->string());
  ::close(keeper);
  reader.join();
  ::close(read_end);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(through, slurp((*dir_ / "good.json").string()));
  // A symlink is followed and stays a link.
  fs::create_symlink("target.json", *dir_ / "link.json");
  EXPECT_EQ(run_cli("schedule runtime-tiny-ring -o link.json", dir_->string()).exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(*dir_ / "link.json"));
  EXPECT_EQ(slurp((*dir_ / "target.json").string()), through);
  // "-" is standard output.
  const auto dash = run_cli("schedule runtime-tiny-ring -o -", dir_->string());
  EXPECT_EQ(dash.exit_code, 0) << dash.err;
  EXPECT_THAT(dash.out, HasSubstr(through));
}

}  // namespace
