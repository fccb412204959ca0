// `ringmaster simulate` says what bounds its step, and `ringmaster diff`
// compares two runs, through the real CLI: the NIC what-if on a two-node
// variant of the default experiment (PCIe caps GPU-to-NIC traffic, so a
// faster NIC changes nothing, and the report says why), and bad input.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;

// The default cluster (4 x 8 A100, 25 GB/s PCIe to a 200 Gb/s NIC per GPU), two of its nodes, a small ring.
const std::string kTwoNodes =
    " --set parallel.cp=16 --set parallel.ring=ring --set workload.seq_len=32k --set scope=attention_fwd_bwd";
const std::string kFastNic = " --set cluster.nic.bandwidth_Gbps=800";

struct Runs {
  std::filesystem::path dir = temp_dir("cli_diff");
  std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
};

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

const nlohmann::json* traffic(const nlohmann::json& j, const std::string& which) {
  for (const auto& t : j.at("bound_by").at("traffic"))
    if (t.at("traffic") == which) return &t;
  return nullptr;
}

TEST(CliBoundBy, AFasterNicChangesNothingAndTheReportSaysPcieCapsItsTraffic) {
  auto ra = run_cli("simulate --json" + kTwoNodes), rb = run_cli("simulate --json" + kTwoNodes + kFastNic);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  const auto a = nlohmann::json::parse(ra.out), b = nlohmann::json::parse(rb.out);
  EXPECT_EQ(a.at("step_time_s").get<double>(), b.at("step_time_s").get<double>());
  for (const auto* j : {&a, &b}) {
    const auto* inter = traffic(*j, "inter_node");
    ASSERT_NE(inter, nullptr);
    EXPECT_EQ(inter->at("capped_by"), "pcie");
    EXPECT_EQ(inter->at("capped_share").get<double>(), 1.0);
    bool nic = false;
    for (const auto& k : inter->at("kinds")) {
      EXPECT_EQ(k.at("bottleneck").get<bool>(), k.at("kind") == "pcie");
      EXPECT_GT(k.at("busy_utilisation").get<double>(), 0);
      EXPECT_LE(k.at("busy_utilisation").get<double>(), 1 + 1e-9);
      nic = nic || k.at("kind") == "nic";
    }
    EXPECT_TRUE(nic);
    // This small ring waits on its transfers: the verdict names the PCIe link.
    EXPECT_EQ(j->at("bound_by").at("kind"), "link");
    EXPECT_EQ(j->at("bound_by").at("bottleneck").at("kind"), "pcie");
    EXPECT_THAT(j->at("bound_by").at("verdict").get<std::string>(), HasSubstr("bound by PCIe link"));
    EXPECT_FALSE(j->at("bound_by").at("phases").empty());
    EXPECT_FALSE(j->at("bound_by").at("links").empty());
  }
  EXPECT_EQ(b.at("overrides").at("cluster.nic.bandwidth_Gbps"), "800");
  // The text report says it in words, with the PCIe link's utilisation.
  auto text = run_cli("simulate" + kTwoNodes + kFastNic);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("inter-node traffic"));
  EXPECT_THAT(text.out, HasSubstr("capped by PCIe"));
  EXPECT_THAT(text.out, HasSubstr("while busy"));
  EXPECT_THAT(text.out, HasSubstr("the NIC is not the bottleneck"));
}

TEST(CliBoundBy, AContiguousCausalRingIsBoundByImbalanceByWhatZigzagSaves) {
  // Dense causal attention on one 8-GPU node: the contiguous split gives the
  // last rank the most work at every step; zigzag balances it. The imbalance
  // verdict's estimate of the time lost should be what zigzag saves.
  const std::string ring =
      " --set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set workload.seq_len=64k"
      " --set scope=attention_fwd_bwd --set workload.pattern=dense-causal --set kernel.attention=fa2";
  auto rc = run_cli("simulate --json" + ring + " --set parallel.partition=contiguous");
  auto rz = run_cli("simulate --json" + ring + " --set parallel.partition=zigzag");
  ASSERT_EQ(rc.exit_code, 0) << rc.err;
  ASSERT_EQ(rz.exit_code, 0) << rz.err;
  const auto c = nlohmann::json::parse(rc.out), z = nlohmann::json::parse(rz.out);
  EXPECT_EQ(c.at("bound_by").at("kind"), "imbalance");
  EXPECT_THAT(c.at("bound_by").at("verdict").get<std::string>(), HasSubstr("bound by imbalance"));
  EXPECT_EQ(z.at("bound_by").at("kind"), "compute");
  const double saved = c.at("step_time_s").get<double>() - z.at("step_time_s").get<double>();
  const double lost = c.at("bound_by").at("imbalance").at("lost_s").get<double>();
  EXPECT_GT(saved, 0);
  EXPECT_NEAR(lost, saved, 0.1 * saved);
}

TEST(CliDiff, ShowsTheChangedInputAndThatTheStepDidNotMove) {
  Runs r;
  write(r.a, run_cli("simulate --json" + kTwoNodes).out);
  write(r.b, run_cli("simulate --json" + kTwoNodes + kFastNic).out);
  auto text = run_cli("diff " + r.a + " " + r.b);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("--set cluster.nic.bandwidth_Gbps"));
  EXPECT_THAT(text.out, HasSubstr("(unchanged)"));
  EXPECT_THAT(text.out, HasSubstr("critical path by kind (s): no change"));
  auto js = run_cli("diff --json " + r.a + " " + r.b);
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto d = nlohmann::json::parse(js.out);
  ASSERT_EQ(d.at("inputs").size(), 1u);
  // A ran the cluster file's 200 Gb/s NICs: the value the override replaced, not "-".
  EXPECT_EQ(d.at("inputs")[0], nlohmann::json({{"key", "--set cluster.nic.bandwidth_Gbps"}, {"a", "200"}, {"b", "800"}}));
  EXPECT_EQ(d.at("figures")[0].at("name"), "step_time_s");
  EXPECT_EQ(d.at("figures")[0].at("change").get<double>(), 0.0);
  // The NIC ports run emptier at four times the rate; nothing else moved.
  bool nic = false;
  for (const auto& l : d.at("link_utilisation"))
    if (l.at("name") == "busiest nic") {
      nic = true;
      EXPECT_LT(l.at("change").get<double>(), 0);
    }
  EXPECT_TRUE(nic);
  EXPECT_TRUE(d.at("critical_path_by_kind").empty());
  EXPECT_EQ(d.at("verdict").at("a"), d.at("verdict").at("b"));
}

TEST(CliDiff, WhereTheTimeMovedWhenTheRingGrows) {
  Runs r;
  write(r.a, run_cli("simulate --json" + kTwoNodes).out);
  write(r.b, run_cli("simulate --json" + kTwoNodes + " --set parallel.cp=8").out);
  auto js = run_cli("diff --json " + r.a + " " + r.b);
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto d = nlohmann::json::parse(js.out);
  bool cp = false;
  for (const auto& i : d.at("inputs"))
    if (i.at("key") == "parallel.cp") {
      cp = true;
      EXPECT_EQ(i.at("a"), "16");
      EXPECT_EQ(i.at("b"), "8");
    }
  EXPECT_TRUE(cp);
  const auto& step = d.at("figures")[0];
  EXPECT_NE(step.at("change").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(step.at("change").get<double>(), step.at("b").get<double>() - step.at("a").get<double>());
  ASSERT_FALSE(d.at("critical_path_by_kind").empty());
  // Largest change first.
  const auto& kinds = d.at("critical_path_by_kind");
  for (size_t i = 1; i < kinds.size(); ++i)
    EXPECT_GE(std::abs(kinds[i - 1].at("change").get<double>()), std::abs(kinds[i].at("change").get<double>()));
}

TEST(CliDiff, BadInputIsOneLineAndExitTwo) {
  Runs r;
  write(r.a, run_cli("simulate --json" + kTwoNodes).out);
  write(r.b, "{\"worker\": 1}");
  const std::string not_json = (r.dir / "not.json").string();
  write(not_json, "step time 3 s\n");
  const struct {
    std::string args, says;
  } cases[] = {
      {"diff " + r.a + " " + (r.dir / "missing.json").string(), "missing.json"},
      {"diff " + r.a + " " + not_json, "not valid JSON"},
      {"diff " + r.b + " " + r.a, "not a `ringmaster simulate --json` output (no key \"step_time_s\")"},
      {"diff " + r.a, "b is required"},
  };
  for (const auto& c : cases) {
    auto res = run_cli(c.args);
    EXPECT_EQ(res.exit_code, 2) << c.args;
    EXPECT_EQ(res.out, "") << c.args;
    EXPECT_THAT(res.err, HasSubstr(c.says)) << c.args;
    EXPECT_THAT(res.err, HasSubstr("ringmaster: error: "));
    EXPECT_EQ(std::count(res.err.begin(), res.err.end(), '\n'), 1) << res.err;
  }
}

// Key fields of another type (a hand-edited report, another version's) name
// their rows as text instead of ending diff in a library's type error.
TEST(CliDiff, KeyFieldsOfAnotherTypeStillNameTheirRows) {
  Runs r;
  auto j = nlohmann::json::parse(run_cli("simulate --json" + kTwoNodes).out);
  ASSERT_FALSE(j["critical_path"]["by_kind"].empty());
  j["critical_path"]["by_kind"][0]["kind"] = 7;
  j["critical_path"]["by_kind"][0]["phase"] = nullptr;
  for (auto& l : j["bound_by"]["links"]) l["name"] = 3.5;
  for (auto& p : j["bound_by"]["phases"]) p["phase"] = false;
  write(r.a, j.dump());
  write(r.b, run_cli("simulate --json" + kTwoNodes).out);
  auto res = run_cli("diff --json " + r.a + " " + r.b);
  ASSERT_EQ(res.exit_code, 0) << res.err;
  const auto d = nlohmann::json::parse(res.out);
  bool named = false;
  for (const auto& row : d.at("critical_path_by_kind")) named = named || row.dump().find("7 null") != std::string::npos;
  EXPECT_TRUE(named) << d.at("critical_path_by_kind").dump();
}

}  // namespace
}  // namespace rm::test
