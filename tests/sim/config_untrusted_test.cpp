// Config readers on untrusted input found by fuzzing (tests/fuzz/fuzz_set,
// docs/robustness.md): each answer is a ConfigError naming the field.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "tests/support/config_error_of.hpp"

namespace rm {
namespace {

using ::testing::HasSubstr;
using rm::test::config_error_of;

TEST(UntrustedConfigNames, ANameTooLongForTheFileSystemIsAConfigError) {
  // Once std::filesystem::filesystem_error ("File name too long") out of ConfigStore::load.
  const std::string name = std::string(5000, 'a') + ".json";
  EXPECT_THAT(config_error_of([&] { load_experiment(ConfigStore{}, "", {"model=" + name}); }),
              HasSubstr("$.model: models file \"aaaa"));
  EXPECT_THAT(config_error_of([&] { load_experiment(ConfigStore{}, "", {"model=" + name}); }),
              HasSubstr(".json\" cannot be looked up (File name too long)"));
  EXPECT_THAT(config_error_of([&] { load_experiment(ConfigStore{}, "", {"cluster=" + std::string(5000, 'b')}); }),
              HasSubstr("unknown cluster"));
}

}  // namespace
}  // namespace rm
