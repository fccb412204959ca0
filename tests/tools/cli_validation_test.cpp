// tools/validation.sh predicts published measurements from shipped experiments: each one it
// names must load and simulate. Here each runs at reduced size (16K tokens, one layer's
// attention forward, then one decoder layer), so a broken or slow experiment fails fast.
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

// The experiments named on the script's EXPERIMENTS="..." line.
std::vector<std::string> validation_experiments() {
  const std::string script = slurp(std::string(RINGMASTER_SOURCE_DIR) + "/tools/validation.sh");
  std::smatch m;
  std::vector<std::string> names;
  if (!std::regex_search(script, m, std::regex("\nEXPERIMENTS=\"([^\"]*)\""))) return names;
  std::istringstream in(m[1].str());
  for (std::string n; in >> n;) names.push_back(n);
  return names;
}

TEST(CliValidation, ScriptNamesShippedExperiments) {
  const auto names = validation_experiments();
  ASSERT_GE(names.size(), 5u) << "no EXPERIMENTS=\"...\" line in tools/validation.sh";
  for (const auto& n : names)
    EXPECT_TRUE(std::filesystem::exists(std::string(RINGMASTER_SOURCE_DIR) + "/configs/experiments/" + n + ".json"))
        << n;
}

TEST(CliValidation, EveryExperimentSimulatesAtReducedSize) {
  for (const auto& name : validation_experiments()) {
    for (const char* scope : {"attention_fwd", "layer"}) {
      auto r = run_cli("simulate --json " + name + " --set workload.seq_len=16k --set scope=" + scope);
      ASSERT_EQ(r.exit_code, 0) << name << " " << scope << ": " << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j.at("experiment").at("name"), name);
      EXPECT_EQ(j.at("experiment").at("scope"), scope);
      EXPECT_GT(j.at("step_time_s").get<double>(), 0) << name << " " << scope;
    }
  }
}

}  // namespace
}  // namespace rm::test
