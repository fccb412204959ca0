// The readers' cases of issue 41: reading JSON is linear in the objects (no
// container scans while the tree is built), a NUL byte ends nothing (nlohmann
// would stop reading there), parse errors never echo the bytes read, and only
// regular files are read (a FIFO blocked open(), a device never ended).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/trace_error_of.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/json_dom_builder.hpp"
#include "traces/json_text.hpp"
#include "traces/kineto.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces {
namespace {

using ::testing::HasSubstr;
using test::trace_error_of;
using ::testing::Not;
namespace fs = std::filesystem;

// Containers that count how often they are walked from the start: nlohmann's
// callback parser walks the parent at every object end (the quadratic of issue 41).
int64_t g_scans = 0;

template <class K, class V, class... Rest>
struct CountingMap : std::map<K, V, Rest...> {
  using std::map<K, V, Rest...>::map;
  auto begin() { return ++g_scans, std::map<K, V, Rest...>::begin(); }
  auto begin() const { return ++g_scans, std::map<K, V, Rest...>::begin(); }
};
template <class T, class... Rest>
struct CountingVector : std::vector<T, Rest...> {
  using std::vector<T, Rest...>::vector;
  auto begin() { return ++g_scans, std::vector<T, Rest...>::begin(); }
  auto begin() const { return ++g_scans, std::vector<T, Rest...>::begin(); }
};
using CountingJson = nlohmann::basic_json<CountingMap, CountingVector>;

std::string array_of_objects(int n) {
  std::string s = "{\"x\":[";
  for (int i = 0; i < n; ++i) s += i ? ",{}" : "{}";
  return s + "]}";
}

int64_t scans_building(const std::string& text) {
  g_scans = 0;
  const std::string name = "in.json";
  JsonDomBuilder<CountingJson> builder(name);
  EXPECT_TRUE(CountingJson::sax_parse(text, &builder));
  const CountingJson j = builder.take();
  EXPECT_EQ(j["x"].size(), std::count(text.begin(), text.end(), '{') - 1);
  return g_scans;
}

int64_t scans_of_callback_parser(const std::string& text) {
  g_scans = 0;
  const CountingJson j = CountingJson::parse(text, [](int, nlohmann::detail::parse_event_t, CountingJson&) { return true; });
  return j.empty() ? -1 : g_scans;
}

TEST(JsonReading, BuildingTheTreeWalksNoContainer) {
  // The counter sees the quadratic: the callback parser walks once per object.
  EXPECT_GE(scans_of_callback_parser(array_of_objects(2000)), 2000);
  // The reader's builder never walks a container, at any size.
  EXPECT_EQ(scans_building(array_of_objects(2000)), 0);
  EXPECT_EQ(scans_building(array_of_objects(4000)), 0);
  std::string keys = "{";
  for (int i = 0; i < 3000; ++i) keys += fmt::format("{}\"k{}\":{{}}", i ? "," : "", i);
  g_scans = 0;
  const std::string name = "in.json";
  JsonDomBuilder<CountingJson> builder(name);
  EXPECT_TRUE(CountingJson::sax_parse(keys + "}", &builder));
  const CountingJson j = builder.take();  // alive: its destructor walks each object once, linearly
  EXPECT_EQ(j.size(), 3000u);
  EXPECT_EQ(g_scans, 0);
}

// The builder's tree is the one nlohmann's own parser builds, on every
// shipped config and every fuzz corpus input that both accept.
TEST(JsonReading, TheTreeIsNlohmannsTree) {
  int compared = 0;
  for (const char* folder : {"configs", "tests/fuzz/corpus", "tests/data"}) {
    const fs::path root = fs::path(RINGMASTER_SOURCE_DIR) / folder;
    if (!fs::exists(root)) continue;
    for (const auto& f : fs::recursive_directory_iterator(root)) {
      if (!f.is_regular_file() || f.path().extension() != ".json" || f.file_size() > (8 << 20)) continue;
      std::ifstream in(f.path(), std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const nlohmann::json plain = nlohmann::json::parse(text, nullptr, false);
      if (plain.is_discarded()) continue;
      try {
        EXPECT_EQ(parse_json_checked(text, f.path().string()), plain) << f.path();
        ++compared;
      } catch (const JsonTextError&) {  // a repeated key, deep nesting: refused by design
      }
    }
  }
  EXPECT_GE(compared, 20);
}

std::string json_error_of(std::string_view text) {
  try {
    (void)parse_json_checked(text, "in.json");
  } catch (const JsonTextError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonReading, ANulByteEndsNothing) {
  using namespace std::string_literals;
  EXPECT_EQ(json_error_of("{\"a\": 1}\0garbage"s),
            "in.json: a NUL byte at byte offset 8 (JSON text never holds one)");
  EXPECT_THAT(json_error_of("{\"a\": \"x\0y\"}"s), HasSubstr("in.json: a NUL byte at byte offset 8"));
  EXPECT_EQ(json_error_of("{\"a\": \"x\\u0000y\"}"), "(no error)");  // written as JSON writes it: fine
}

TEST(JsonReading, ParseErrorsGiveThePlaceNotTheBytes) {
  const std::string said = json_error_of("trust me\n");  // nlohmann said "last read: 'trus'"
  EXPECT_THAT(said, HasSubstr("in.json: not valid JSON (parse error at line 1, column"));
  EXPECT_THAT(said, Not(HasSubstr("trus")));
  EXPECT_THAT(json_error_of("{\"a\": 1} secret"), Not(HasSubstr("secret")));
  EXPECT_THAT(json_error_of("{\"name\": \"\xff\xfe\"}"), Not(HasSubstr("\xff")));
  EXPECT_EQ(json_error_reason("[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while "
                              "parsing value - invalid literal; last read: 'ro'; expected end of input"),
            "parse error at line 1, column 2: syntax error while parsing value - invalid literal; expected end of input");
}

class ReaderFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rm_reader_hardening_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  std::string put(const std::string& name, const std::string& bytes) const {
    std::ofstream(at(name), std::ios::binary) << bytes;
    return at(name);
  }
  fs::path dir_;
};

std::string a_chrome_trace() {
  Timeline t;
  Event e;
  e.op = 0;
  e.name = e.category = "attn_fwd";
  e.end_s = 1e-3;
  t.events.push_back(e);
  return to_chrome_json(t);
}

TEST_F(ReaderFiles, ANulByteAfterValidJsonIsRefusedByEveryReader) {
  using namespace std::string_literals;
  const std::string trace = a_chrome_trace() + "\0garbage"s;
  const std::string offset = fmt::format("at byte offset {}", trace.size() - 8);
  EXPECT_THAT(trace_error_of([&] { read_chrome_trace(put("t.json", trace)); }), HasSubstr("t.json: a NUL byte " + offset));
  write_text_file_atomic(at("t.json.gz"), trace);
  EXPECT_THAT(trace_error_of([&] { read_chrome_trace(at("t.json.gz")); }), HasSubstr("t.json.gz: a NUL byte " + offset));
  // Kineto's streaming reader, plain and gzipped, from memory and from files.
  const std::string valid =
      R"({"deviceProperties": [], "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, )"
      R"("ts": 1, "dur": 1, "args": {"stream": 7, "correlation": 1}}]})";
  const std::string kineto = valid + "\0garbage"s;
  const std::string at_end = fmt::format("a NUL byte at byte offset {}", valid.size());
  EXPECT_THAT(trace_error_of([&] { parse_kineto({{"k.json", kineto}}); }),
              HasSubstr("k.json: " + at_end));
  EXPECT_THAT(trace_error_of([&] { read_kineto({put("k.json", kineto)}); }), HasSubstr(at_end));
  write_text_file_atomic(at("k.json.gz"), kineto);
  EXPECT_THAT(trace_error_of([&] { read_kineto({at("k.json.gz")}); }), HasSubstr(at_end));
  // Without the NUL byte all of them read.
  EXPECT_EQ(read_chrome_trace(put("ok.json", a_chrome_trace())).events.size(), 1u);
  EXPECT_EQ(parse_kineto({{"k.json", valid}}).timeline.events.size(), 1u);
}

TEST_F(ReaderFiles, OnlyRegularFilesAreRead) {
  const std::string fifo = at("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No writer: open() once blocked here for ever.
  EXPECT_EQ(trace_error_of([&] { read_text_file(fifo); }), fifo + ": is a FIFO, expected a regular file");
  EXPECT_THAT(trace_error_of([&] { read_kineto({fifo}); }), HasSubstr(fifo + ": is a FIFO, expected a regular file"));
  EXPECT_THAT(trace_error_of([&] { read_chrome_trace("/dev/null"); }), HasSubstr("/dev/null: is a character device"));
  EXPECT_THAT(trace_error_of([&] { read_kineto({"/dev/zero"}); }), HasSubstr("/dev/zero: is a character device"));
  EXPECT_THAT(trace_error_of([&] { read_kineto({dir_.string()}); }), HasSubstr("is a directory, expected a file"));
  EXPECT_THAT(trace_error_of([&] { read_text_file(at("absent.json")); }), HasSubstr("absent.json: cannot open file"));
  // A symlink to a regular file is a regular file.
  fs::create_symlink(put("real.json", "{}"), at("link.json"));
  EXPECT_EQ(read_text_file(at("link.json")), "{}");
}

TEST_F(ReaderFiles, ARegularFileOverTheLimitIsRefusedBeforeItIsRead) {
  const std::string big = put("big.json", "");
  fs::resize_file(big, (int64_t(1) << 40) + 1);  // 1 TiB, sparse: reading it would take hours
  EXPECT_THAT(trace_error_of([&] { read_text_file(big); }), HasSubstr("big.json: larger than the 2048 MiB limit"));
  EXPECT_EQ(read_text_file(put("small.json", std::string(1 << 20, ' ')), 1 << 20).size(), size_t(1) << 20);
  EXPECT_THAT(trace_error_of([&] { read_text_file(put("over.json", std::string((1 << 20) + 1, ' ')), 1 << 20); }),
              HasSubstr("over.json: larger than the 1 MiB limit"));
}

TEST_F(ReaderFiles, GzipIsInflatedAsItIsReadAndRefusedAtTheLimit) {
  write_text_file_atomic(at("exact.json.gz"), std::string(1 << 20, ' '));
  EXPECT_EQ(read_text_file(at("exact.json.gz"), 1 << 20).size(), size_t(1) << 20);
  write_text_file_atomic(at("over.json.gz"), std::string(3 << 20, ' '));
  EXPECT_THAT(trace_error_of([&] { read_text_file(at("over.json.gz"), 1 << 20); }),
              HasSubstr("over.json.gz: decompresses to more than the 1 MiB limit"));
  // A member cut short, and a file that is no gzip at all.
  std::string gz;
  {
    std::ifstream in(at("over.json.gz"), std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_THAT(trace_error_of([&] { read_text_file(put("cut.json.gz", gz.substr(0, gz.size() / 2))); }),
              HasSubstr("cut.json.gz: truncated gzip data"));
  EXPECT_THAT(trace_error_of([&] { read_text_file(put("plain.json.gz", "{}")); }),
              HasSubstr("plain.json.gz: corrupt gzip data"));
  EXPECT_THAT(trace_error_of([&] { read_text_file(put("empty.json.gz", "")); }),
              HasSubstr("empty.json.gz: truncated gzip data"));
}

}  // namespace
}  // namespace rm::traces
