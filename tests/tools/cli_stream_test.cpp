// `ringmaster simulate --stream` (docs/engines.md, "Streaming"): the streamed
// run's figures equal the whole run's, with its line and JSON field; `auto`
// streams wherever a streamed run can answer and fits, and builds the whole step
// only for what needs it; what a streamed run cannot give is refused in one line
// (exit code 2).
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSmall = " --set workload.seq_len=16k --set model.layers=2";

// Every figure, to the printed digit: bound-by's too (each link's sums and unions).
void expect_same_figures(const nlohmann::json& whole, const nlohmann::json& streamed) {
  for (const char* k : {"step_time_s", "tokens_per_s", "gpus", "flops", "mfu", "hfu", "dense_equivalent_speedup",
                        "breakdown", "imbalance", "critical_path", "bound_by", "memory", "ops", "generator"})
    EXPECT_EQ(whole[k], streamed[k]) << k;
  EXPECT_FALSE(whole["critical_path"].is_null());
  EXPECT_TRUE(streamed["bound_by"].is_object());
}

// `simulate --json` of sets run whole (--stream off) and streamed (--stream on); both must succeed.
void run_whole_and_streamed(const std::string& sets, nlohmann::json& whole, nlohmann::json& streamed) {
  auto w = run_cli("simulate --json --stream off" + sets);
  auto s = run_cli("simulate --json --stream on" + sets);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  ASSERT_EQ(s.exit_code, 0) << s.err;
  whole = nlohmann::json::parse(w.out), streamed = nlohmann::json::parse(s.out);
}

TEST(CliStream, StreamedFiguresAreTheWholeRuns) {
  for (const std::string& sets : {kSmall, kSmall + " --set parallel.dp=2 --set parallel.cp=8 --set parallel.hp=2",
                                  kSmall + " --set parallel.dp=4 --set parallel.cp=8 --symmetry dp"}) {
    SCOPED_TRACE(sets);
    nlohmann::json jw, js;
    ASSERT_NO_FATAL_FAILURE(run_whole_and_streamed(sets, jw, js));
    expect_same_figures(jw, js);
    EXPECT_FALSE(jw.contains("streamed"));
    EXPECT_GT(js["streamed"]["chunks"].get<int>(), 2);
    EXPECT_LT(js["streamed"]["peak_ops_held"].get<int64_t>(), js["ops"].get<int64_t>());
    EXPECT_GT(js["streamed"]["peak_path_nodes"].get<int64_t>(), 0);
    EXPECT_LT(js["streamed"]["peak_path_nodes"].get<int64_t>(), js["ops"].get<int64_t>());
  }
  auto text = run_cli("simulate --stream on" + kSmall);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("streamed: generated and simulated in "));
  EXPECT_THAT(text.out, HasSubstr("critical path  "));
  EXPECT_THAT(text.out, Not(HasSubstr("not traced")));
}

// --symmetry dp where the shortcut is not exact (replicas straddle the nodes): the
// whole run refuses it before it starts; a streamed run meets a route that does not
// translate as it first uses it, and then streams the full step: the same figures.
TEST(CliStream, AShortcutThatDoesNotHoldStreamsTheFullStep) {
  const std::string sets = kSmall + " --set cluster.nodes=2 --set parallel.cp=2 --set parallel.dp=8 --symmetry dp";
  nlohmann::json jw, js;
  ASSERT_NO_FATAL_FAILURE(run_whole_and_streamed(sets, jw, js));
  expect_same_figures(jw, js);
  EXPECT_EQ(js["symmetry"]["replicas_simulated"], 8);
  EXPECT_THAT(js["symmetry"]["note"].get<std::string>(), HasSubstr("the full step: the data-parallel shortcut does not apply: route"));
  EXPECT_GT(js["streamed"]["chunks"].get<int>(), 2);
}

// --threads changes who does the work, not the answer: a streamed run's generator
// on a thread of its own gives what one thread gives, byte for byte.
TEST(CliStream, TheThreadCountChangesNothing) {
  for (const std::string mode : {" --stream on", " --stream off"}) {
    auto one = run_cli("simulate --json --threads 1" + mode + kSmall);
    auto two = run_cli("simulate --json --threads 2" + mode + kSmall);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(one.out, two.out) << mode;
  }
  auto bad = run_cli("simulate --threads -1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--threads: expected 0"));
}

struct Memory {
  explicit Memory(const char* bytes) { ::setenv("RINGMASTER_MEMORY_BYTES", bytes, 1); }
  ~Memory() { ::unsetenv("RINGMASTER_MEMORY_BYTES"); }
};

// The default step: ~0.6 GB whole, ~0.2 GB streamed (the estimates; it holds less).
TEST(CliStream, AutoStreamsWhereverItCan) {
  auto whole = run_cli("simulate --json --stream off");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto jw = nlohmann::json::parse(whole.out);
  EXPECT_FALSE(jw.contains("streamed"));
  // Room for both: streamed anyway, the same figures, and it says why.
  auto roomy = run_cli("simulate --json");
  ASSERT_EQ(roomy.exit_code, 0) << roomy.err;
  const auto jr = nlohmann::json::parse(roomy.out);
  expect_same_figures(jw, jr);
  EXPECT_GT(jr["streamed"]["chunks"].get<int>(), 2);
  EXPECT_THAT(jr["streamed"]["note"].get<std::string>(), HasSubstr("the whole run's figures in less time and memory"));
  // What only the whole run gives is still given: SimGrid runs the whole step.
  auto simgrid = run_cli("simulate --json --engine simgrid" + kSmall);
  ASSERT_EQ(simgrid.exit_code, 0) << simgrid.err;
  EXPECT_FALSE(nlohmann::json::parse(simgrid.out).contains("streamed"));
  Memory m("300000000");
  auto tight = run_cli("simulate --json");
  ASSERT_EQ(tight.exit_code, 0) << tight.err;
  const auto jt = nlohmann::json::parse(tight.out);
  expect_same_figures(jw, jt);
  EXPECT_THAT(jt["streamed"]["note"].get<std::string>(), HasSubstr("the whole step needs ~0.6 GB"));
  // Not streamed: the whole run's refusal, saying what streaming would need.
  auto off = run_cli("simulate --stream off");
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_THAT(off.err, HasSubstr("this simulation needs ~0.6 GB"));
  auto traced = run_cli("simulate --trace t.json");
  EXPECT_EQ(traced.exit_code, 2);
  EXPECT_THAT(traced.err, HasSubstr("a streamed run (--stream on) would need ~0.2 GB"));
}

// A sweep streams its points that do not fit whole and says so per row.
TEST(CliStream, ASweepSaysWhichPointsStreamed) {
  Memory m("300000000");
  const std::string grid = " --grid scope=attention_fwd,step";
  auto j = run_cli("sweep --quiet --json" + grid);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto rows = nlohmann::json::parse(j.out)["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["simulated"], "whole");
  EXPECT_TRUE(rows[0]["bound_by"].is_string());
  EXPECT_EQ(rows[1]["simulated"], "streamed");
  EXPECT_EQ(rows[1]["bound_by"], "compute");
  EXPECT_GT(rows[1]["step_time_s"].get<double>(), 0);
  auto text = run_cli("sweep --quiet" + grid);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("1 of 2 points were streamed"));
}

TEST(CliStream, StreamedRunsThatDoNotFitAreRefusedAtOnce) {
  Memory m("50000000");
  auto r = run_cli("simulate --stream on");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("this streamed simulation needs ~0.2 GB"));
  EXPECT_TRUE(r.out.empty());
}

TEST(CliStream, RefusesWhatAStreamedRunCannotGive) {
  auto bad = run_cli("simulate --stream maybe" + kSmall);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--stream: expected auto, on or off, got \"maybe\""));
  auto trace = run_cli("simulate --stream on --trace t.json" + kSmall);
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_THAT(trace.err, HasSubstr("keeps no Timeline"));
  auto simgrid = run_cli("simulate --stream on --engine simgrid" + kSmall);
  EXPECT_EQ(simgrid.exit_code, 2);
  EXPECT_THAT(simgrid.err, HasSubstr("only the analytic engine streams"));
  auto file = run_cli("simulate --stream on --schedule x.json.gz");
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_THAT(file.err, HasSubstr("a Schedule file is read whole"));
}

}  // namespace
}  // namespace rm::test
