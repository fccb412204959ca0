// The readers' guards against untrusted input (issue 13): JSON limits in
// traces/json_text.hpp and the file limits and output rules of
// traces/text_file.hpp. Each case was once a crash, a hang, a silent
// misreading or a clobbered file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/trace_error_of.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/json_text.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {
namespace {

using ::testing::HasSubstr;
using test::trace_error_of;
namespace fs = std::filesystem;

std::string error_of(std::string_view text) {
  try {
    parse_json_checked(text, "in.json");
  } catch (const JsonTextError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonText, DeepNestingIsRefusedNotACrash) {
  for (int depth : {kMaxJsonDepth + 1, 10000, 100000}) {
    const std::string arrays = std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
    EXPECT_THAT(error_of(arrays), HasSubstr("in.json: nested deeper than")) << depth;
    std::string objects;
    for (int i = 0; i < depth; ++i) objects += "{\"a\":";
    objects += '1';
    objects.append(size_t(depth), '}');
    EXPECT_THAT(error_of(objects), HasSubstr("in.json: nested deeper than")) << depth;
  }
  // The limit itself is fine.
  const int ok = kMaxJsonDepth - 1;
  EXPECT_EQ(error_of(std::string(size_t(ok), '[') + std::string(size_t(ok), ']')), "");
}

TEST(JsonText, RepeatedKeysAreRefusedPerObject) {
  EXPECT_THAT(error_of(R"({"a": 1, "a": 2})"), HasSubstr("in.json: key \"a\" appears twice in one object"));
  EXPECT_THAT(error_of(R"({"x": {"b": 1, "c": 2, "b": 3}})"), HasSubstr("key \"b\" appears twice"));
  // The same key in sibling or nested objects is not a repeat.
  EXPECT_EQ(error_of(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]})"), "");
}

TEST(JsonText, NumbersOutOfRangeAndBadTextNameTheInput) {
  EXPECT_THAT(error_of(R"({"flops": 1e999})"), HasSubstr("in.json: a number is out of range"));
  EXPECT_THAT(error_of("{\"name\": \"\xff\xfe\"}"), HasSubstr("in.json: not valid JSON"));
  EXPECT_THAT(error_of(R"({"a": })"), HasSubstr("in.json: not valid JSON (parse error at line 1, column 7"));
  EXPECT_EQ(parse_json_checked(R"({"a": [1, 2.5, "x"]})", "in.json")["a"][1], 2.5);
}

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt_name();
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string fmt_name() { return "rm_untrusted_" + std::to_string(getpid()); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(Files, ADirectoryIsNotAFile) {
  EXPECT_THAT(trace_error_of([&] { read_text_file(dir_.string()); }), HasSubstr("is a directory"));
  EXPECT_THAT(trace_error_of([&] { write_text_file_atomic(dir_.string(), "x"); }), HasSubstr("is a directory"));
  EXPECT_TRUE(fs::is_directory(dir_));
}

TEST_F(Files, EndlessInputIsRefusedAtOnce) {  // a device is no file (issue 41; once read up to the limit)
  EXPECT_THAT(trace_error_of([] { read_text_file("/dev/zero", 1 << 20); }),
              HasSubstr("/dev/zero: is a character device, expected a regular file"));
}

TEST_F(Files, BytesAfterTheGzipStreamAreRefused) {
  const std::string gz = at("t.json.gz");
  write_text_file_atomic(gz, "{\"a\": 1}");
  EXPECT_EQ(read_text_file(gz), "{\"a\": 1}");
  { std::ofstream(gz, std::ios::app | std::ios::binary) << "junk"; }
  EXPECT_THAT(trace_error_of([&] { read_text_file(gz); }), HasSubstr("4 bytes after the end of the gzip stream"));
}

TEST_F(Files, ARegularFileIsReplacedAtomicallyAndNoTemporaryStays) {
  const std::string p = at("out.json");
  write_text_file_atomic(p, "one");
  write_text_file_atomic(p, "two");
  EXPECT_EQ(read_text_file(p), "two");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);  // no out.json.tmp-XXXXXX left beside it
}

TEST_F(Files, ASymlinkIsFollowedAndStaysALink) {
  const std::string target = at("real.json"), link = at("link.json");
  write_text_file_atomic(target, "old");
  fs::create_symlink("real.json", link);  // relative, as users make them
  write_text_file_atomic(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_text_file(target), "new");
  // A dangling link creates its target.
  const std::string dangling = at("dangling.json");
  fs::create_symlink("made.json", dangling);
  write_text_file_atomic(dangling, "made");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(read_text_file(at("made.json")), "made");
}

TEST_F(Files, AFifoIsWrittenIntoNotReplaced) {
  const std::string fifo = at("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // The reader is there first: a FIFO no process reads is refused (text_write_test.cpp).
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_text_file_atomic(fifo, "through the pipe");
  char buf[64];
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  const std::string got(buf, size_t(std::max<ssize_t>(n, 0)));
  EXPECT_EQ(got, "through the pipe");
  struct stat st{};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(Files, ATraceWithDuplicateKeysNamesTheFile) {
  const std::string p = at("dup.json");
  { std::ofstream(p) << R"({"traceEvents": [], "traceEvents": []})"; }
  const std::string said = trace_error_of([&] { read_chrome_trace(p); });
  EXPECT_THAT(said, HasSubstr(": key \"traceEvents\" appears twice"));
  EXPECT_EQ(said.rfind(p, 0), 0u) << said;  // the message starts with the file
}

}  // namespace
}  // namespace rm::traces
