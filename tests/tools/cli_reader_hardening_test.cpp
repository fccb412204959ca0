// The CLI's readers on the inputs of issue 41: `diff` reads through the
// checked reader (10^5 brackets once crashed it, a repeated step_time_s was
// taken silently), a NUL byte after valid JSON is refused by every reader,
// inputs that are not regular files are refused at once (a FIFO blocked
// open()), and a config naming a file that is no JSON names the field, not
// the file's bytes. Each answer: one line, exit code 2, nothing on stdout.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/run_cli.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using rm::test::run_cli;
using rm::test::slurp;
namespace fs = std::filesystem;

class CliReaders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(rm::test::temp_dir("cli_readers"));
    const auto s = run_cli("schedule runtime-tiny-ring -o good.json", dir_->string());
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto j = run_cli("simulate --json --set parallel.cp=16 --set workload.seq_len=32k --set scope=attention_fwd",
                           dir_->string());
    ASSERT_EQ(j.exit_code, 0) << j.err;
    write("run.json", j.out);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string text(const std::string& name) { return slurp((*dir_ / name).string()); }
  static std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream((*dir_ / name).string(), std::ios::binary) << bytes;
    return name;
  }
  static std::string gzip(const std::string& name, const std::string& bytes) {
    write(name + ".plain", bytes);
    const std::string cmd = "gzip -c '" + (*dir_ / (name + ".plain")).string() + "' > '" + (*dir_ / name).string() + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return name;
  }
  // Runs the CLI in the folder; expects the one-line refusal with exit code 2.
  static std::string refused(const std::string& args) { return rm::test::expect_one_line_refusal(args, dir_->string()); }
  static fs::path* dir_;
};
fs::path* CliReaders::dir_ = nullptr;

TEST_F(CliReaders, DiffReadsThroughTheCheckedReader) {
  const std::string run = text("run.json");
  ASSERT_EQ(run.front(), '{');
  const std::string deep = "{\"deep\": " + std::string(100000, '[') + std::string(100000, ']') + ", " + run.substr(1);
  EXPECT_THAT(refused("diff run.json " + write("deep.json", deep)), HasSubstr("deep.json: nested deeper than 256 levels"));
  const std::string twice = "{\"step_time_s\": 1, " + run.substr(1);
  EXPECT_THAT(refused("diff " + write("twice.json", twice) + " run.json"),
              HasSubstr("twice.json: key \"step_time_s\" appears twice in one object"));
  EXPECT_EQ(run_cli("diff run.json run.json", dir_->string()).exit_code, 0);
}

TEST_F(CliReaders, ANulByteAfterValidJsonIsRefusedByEveryReader) {
  using namespace std::string_literals;
  const std::string nul = "\0garbage"s;
  const std::string run = text("run.json"), schedule = text("good.json");
  const std::string exp = R"({"name": "nul"})";
  const auto at = [](size_t offset) { return "a NUL byte at byte offset " + std::to_string(offset); };
  EXPECT_THAT(refused("simulate " + write("exp_nul.json", exp + nul)), HasSubstr("exp_nul.json: " + at(exp.size())));
  EXPECT_THAT(refused("simulate " + gzip("exp_nul.json.gz", exp + nul)), HasSubstr("exp_nul.json.gz: " + at(exp.size())));
  EXPECT_THAT(refused("simulate --schedule " + write("s_nul.json", schedule + nul)),
              HasSubstr("s_nul.json: " + at(schedule.size())));
  EXPECT_THAT(refused("simulate --schedule " + gzip("s_nul.json.gz", schedule + nul)),
              HasSubstr("s_nul.json.gz: " + at(schedule.size())));
  EXPECT_THAT(refused("diff run.json " + write("run_nul.json", run + nul)), HasSubstr("run_nul.json: " + at(run.size())));
  // Followed by a space and garbage it was already refused; without the NUL byte it reads.
  EXPECT_THAT(refused("simulate --schedule " + write("s_space.json", schedule + " garbage")), HasSubstr("s_space.json"));
  EXPECT_EQ(run_cli("simulate --schedule good.json", dir_->string()).exit_code, 0);
}

TEST_F(CliReaders, InputsThatAreNotRegularFilesAreRefusedAtOnce) {
  const fs::path fifo = *dir_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer ever: open() once blocked for ever
  EXPECT_THAT(refused("simulate fifo.json"), HasSubstr("fifo.json: is a FIFO, expected a regular file"));
  EXPECT_THAT(refused("simulate --schedule fifo.json"), HasSubstr("fifo.json: is a FIFO, expected a regular file"));
  EXPECT_THAT(refused("diff run.json fifo.json"), HasSubstr("fifo.json: is a FIFO, expected a regular file"));
  EXPECT_THAT(refused("simulate --set cluster=/dev/zero"),
              HasSubstr("$.cluster: /dev/zero: is a character device, expected a regular file"));
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(CliReaders, AConfigNamingAFileThatIsNoJsonNamesTheFieldNotItsBytes) {
  write("secret.txt", "trust me: hunter2\n");
  const std::string said = refused("simulate " + write("exp_ref.json", R"({"model": "llama2-7b", "cluster": "./secret.txt"})"));
  EXPECT_THAT(said, HasSubstr("exp_ref.json: $.cluster: "));
  EXPECT_THAT(said, HasSubstr("secret.txt: not valid JSON (parse error at line 1, column"));
  EXPECT_THAT(said, Not(HasSubstr("trus")));
  EXPECT_THAT(said, Not(HasSubstr("hunter2")));
}

}  // namespace
