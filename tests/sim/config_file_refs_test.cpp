// A config that names another file (issue 41): a fault of that file is said
// after the field that named it, and none of its bytes are echoed.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "tests/support/config_error_of.hpp"

namespace rm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using rm::test::config_error_of;
namespace fs = std::filesystem;

class ConfigFileRefs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rm_config_refs_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string put(const std::string& name, const std::string& bytes) const {
    std::ofstream((dir_ / name).string(), std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(ConfigFileRefs, AFileThatIsNoJsonIsNamedAfterTheFieldWithoutItsBytes) {
  const std::string secret = put("secret.txt", "trust me: hunter2\n");
  const std::string exp = put("exp.json", R"({"model": "llama2-7b", "cluster": ")" + secret + R"("})");
  const std::string said = config_error_of([&] { load_experiment(ConfigStore{}, exp, {}); });
  EXPECT_THAT(said, HasSubstr(exp + ": $.cluster: " + secret + ": not valid JSON (parse error at line 1, column"));
  EXPECT_THAT(said, Not(HasSubstr("trus")));
  EXPECT_THAT(said, Not(HasSubstr("hunter2")));
  // /etc/passwd itself, as the issue found it: the field and the file, no byte of it.
  if (fs::exists("/etc/passwd")) {
    const std::string passwd = config_error_of([&] { load_experiment(ConfigStore{}, put("p.json", R"({"model": "llama2-7b", "cluster": "/etc/passwd"})"), {}); });
    EXPECT_THAT(passwd, HasSubstr("p.json: $.cluster: /etc/passwd: not valid JSON"));
    EXPECT_THAT(passwd, Not(HasSubstr("last read")));
  }
}

TEST_F(ConfigFileRefs, AFifoOrDeviceNamedByAFieldIsRefusedAtOnce) {
  const std::string fifo = (dir_ / "pipe.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(config_error_of([&] { load_experiment(ConfigStore{}, "", {"cluster=" + fifo}); }),
              HasSubstr("$.cluster: " + fifo + ": is a FIFO, expected a regular file"));
  EXPECT_THAT(config_error_of([&] { load_experiment(ConfigStore{}, fifo, {}); }),
              HasSubstr("experiment: " + fifo + ": is a FIFO, expected a regular file"));
}

TEST_F(ConfigFileRefs, ANulByteAfterAConfigIsRefused) {
  using namespace std::string_literals;
  const std::string exp = put("nul.json", "{\"name\": \"x\"}\0garbage"s);
  EXPECT_THAT(config_error_of([&] { load_experiment(ConfigStore{}, exp, {}); }),
              HasSubstr(exp + ": a NUL byte at byte offset 13"));
}

}  // namespace
}  // namespace rm
