// Speed work must change no answer: the figures `ringmaster simulate --json`
// prints for a set of small configurations (tests/tools/golden_predictions.json,
// written by tools/golden-predictions.sh from the build before issue 9) must
// come out equal to the last digit, on both engines.
#include <cctype>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

struct GoldenCase {
  std::string name, args;
  nlohmann::json expect;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

std::vector<GoldenCase> golden_cases() {
  std::ifstream in(std::string(RINGMASTER_SOURCE_DIR) + "/tests/tools/golden_predictions.json");
  std::vector<GoldenCase> cases;
  for (const auto& c : nlohmann::json::parse(in)) cases.push_back({c.at("name"), c.at("args"), c.at("expect")});
  return cases;
}

// The same subset of the output the script keeps.
nlohmann::json kept_figures(const nlohmann::json& j) {
  nlohmann::json keep;
  for (const char* k : {"step_time_s", "tokens_per_s", "flops", "mfu", "hfu", "ops", "generator"}) keep[k] = j.at(k);
  keep["breakdown"] = j.at("breakdown");
  keep["imbalance"] = j.at("imbalance");
  for (const char* k : {"length_s", "ops", "compute_s", "communication_s", "waiting_s"})
    keep["critical_path"][k] = j.at("critical_path").at(k);
  return keep;
}

class GoldenPredictions : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenPredictions, FiguresUnchangedToTheLastDigit) {
  const GoldenCase& c = GetParam();
  const CliResult r = run_cli("simulate --json " + c.args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json got = kept_figures(nlohmann::json::parse(r.out));
  EXPECT_EQ(got.at("step_time_s"), c.expect.at("step_time_s")) << c.args;
  EXPECT_EQ(got.at("ops"), c.expect.at("ops")) << c.args;
  // Then everything, with the JSON diff for the first difference.
  EXPECT_EQ(got, c.expect) << c.args << "\n" << nlohmann::json::diff(c.expect, got).dump(1).substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenPredictions, ::testing::ValuesIn(golden_cases()),
                         [](const auto& param_info) {
                           std::string n = param_info.param.name;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace rm::test
