// The writing side of traces/ (traces/text_write.hpp, issue 41): what a
// destination that cannot be written gives, a FIFO with no reader, a write
// killed half-way, and the standard output written by length.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "traces/text_file.hpp"
#include "traces/text_write.hpp"

namespace rm::traces {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// What an OutputError said, or "(no error)" when `f` threw none.
std::string output_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const OutputError& e) {
    return e.what();
  }
  return "(no error)";
}

class TextWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rm_text_write_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    return names;
  }
  fs::path dir_;
};

TEST_F(TextWrite, DestinationsThatCannotBeFilesAreOutputErrorsNamingThePath) {
  EXPECT_THAT(output_error_of([] { write_text_file_atomic("", "x"); }), HasSubstr("an empty output path"));
  EXPECT_THAT(output_error_of([&] { write_text_file_atomic(dir_.string(), "x"); }), HasSubstr("is a directory"));
  const std::string missing = at("no/such/out.json");
  EXPECT_EQ(output_error_of([&] { write_text_file_atomic(missing, "x"); }),
            missing + ": the folder " + at("no/such") + " does not exist");
  write_text_file_atomic(at("file"), "x");
  EXPECT_EQ(output_error_of([&] { write_text_file_atomic(at("file/out.json"), "x"); }),
            at("file/out.json") + ": " + at("file") + " is not a folder");
  // The same judgement before any work, as the CLIs ask it.
  EXPECT_THAT(output_path_problem(missing), HasSubstr("does not exist"));
  EXPECT_EQ(output_path_problem(at("new.json")), "");
  EXPECT_EQ(output_path_problem("-"), "");
  EXPECT_EQ(entries(), std::vector<std::string>{"file"});
}

TEST_F(TextWrite, AFifoWithNoReaderIsRefusedNotWaitedOn) {
  const std::string fifo = at("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(output_error_of([&] { write_text_file_atomic(fifo, "x"); }),
              HasSubstr("pipe: a FIFO that no process reads"));
  // With a reader there, more than a pipe holds goes through: the writer waits for it.
  // The reader is open before the write; a second writer of ours keeps its reads
  // from seeing the end before the write begins, and closing it ends them after.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  const int keeper = ::open(fifo.c_str(), O_WRONLY);
  ASSERT_GE(keeper, 0);
  ASSERT_EQ(::fcntl(reader, F_SETFL, 0), 0);
  const std::string big(4 << 20, 'x');
  std::string got;
  std::thread drain([&] {
    char buf[1 << 16];
    ssize_t n;
    while ((n = ::read(reader, buf, sizeof buf)) > 0) got.append(buf, size_t(n));
  });
  write_text_file_atomic(fifo, big);
  ::close(keeper);
  drain.join();
  ::close(reader);
  EXPECT_EQ(got.size(), big.size());
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// Whether this folder's filesystem makes unnamed files (O_TMPFILE).
bool has_unnamed_files(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Writes `text` to `path` in a child that kills itself with SIGKILL once the
// bytes are complete, before they are named: the worst moment to die.
void write_and_die(const std::string& path, const std::string& text) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    set_before_naming_hook([] { ::kill(::getpid(), SIGKILL); });
    write_text_file_atomic(path, text);
    _exit(0);  // not reached: the hook killed it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
}

TEST_F(TextWrite, AWriteKilledBeforeItIsNamedLeavesNothingBehind) {
  if (!has_unnamed_files(dir_)) GTEST_SKIP() << dir_ << ": no O_TMPFILE here (a named temporary would stay)";
  const std::string text(8 << 20, 'y');
  write_and_die(at("new.json"), text);
  EXPECT_TRUE(entries().empty());  // neither new.json nor new.json.tmp-XXXXXX
  write_text_file_atomic(at("old.json"), "old");
  write_and_die(at("old.json"), text);
  EXPECT_EQ(entries(), std::vector<std::string>{"old.json"});
  EXPECT_EQ(read_text_file(at("old.json")), "old");
  // Not killed, the same two ways name the file (new, and replacing one).
  write_text_file_atomic(at("new.json"), "new");
  write_text_file_atomic(at("old.json"), "newer");
  EXPECT_EQ(read_text_file(at("new.json")), "new");
  EXPECT_EQ(read_text_file(at("old.json")), "newer");
  EXPECT_EQ(fs::status(at("new.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  EXPECT_EQ(entries().size(), 2u);
}

TEST_F(TextWrite, StandardOutputIsWrittenByLength) {
  const std::string file = at("stdout");
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ::dup2(fd, STDOUT_FILENO);
  ::close(fd);
  const std::string with_nul("name a\0b here\n", 14);
  write_standard_output(with_nul);
  write_text_file_atomic("-", with_nul);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  EXPECT_EQ(read_text_file(file), with_nul + with_nul);
}

TEST_F(TextWrite, AFullStandardOutputIsAnOutputError) {
  const int full = ::open("/dev/full", O_WRONLY);
  if (full < 0) GTEST_SKIP() << "no /dev/full";
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  ::dup2(full, STDOUT_FILENO);
  ::close(full);
  const std::string error = output_error_of([] { write_standard_output("x"); });
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  EXPECT_THAT(error, HasSubstr("standard output: cannot write"));
}

}  // namespace
}  // namespace rm::traces
