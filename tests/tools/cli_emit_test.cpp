// `--emit` and `ringmaster import megatron` end to end: the emitted flags of
// every case of tests/tools/emit/cases.txt compared exactly with their
// checked-in files, round trips (an emitted experiment simulates to the same
// step; Megatron arguments read back to the same layout), the nearest layout
// predicted, and bad input (one line, exit 2, nothing written).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const fs::path kCases = fs::path(RINGMASTER_SOURCE_DIR) / "tests/tools/emit";
// What every golden case runs on (tools/emit-goldens.sh says the same).
const std::string kBase = " --set cluster=h200-1x8 --set workload.seq_len=8k --set model.layers=2";

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

struct Case {
  std::string name, framework, args;
};

std::vector<Case> golden_cases() {
  std::vector<Case> cases;
  std::ifstream in(kCases / "cases.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    Case c;
    std::getline(ss, c.name, '|');
    std::getline(ss, c.framework, '|');
    std::getline(ss, c.args);
    cases.push_back({trim(c.name), trim(c.framework), trim(c.args)});
  }
  return cases;
}

double step_of(const CliResult& r) { return nlohmann::json::parse(r.out).at("step_time_s").get<double>(); }

TEST(CliEmit, EveryGoldenCaseEmitsItsCheckedInFileExactly) {
  const auto cases = golden_cases();
  ASSERT_GE(cases.size(), 12u);
  std::set<std::string> frameworks;
  const fs::path dir = temp_dir("rm_emit_golden");
  for (const Case& c : cases) {
    frameworks.insert(c.framework);
    const fs::path out = dir / (c.name + ".txt");
    const auto r = run_cli("simulate" + kBase + " " + c.args + " --emit " + c.framework + " -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << c.name << ": " << r.err;
    const std::string expected = slurp((kCases / (c.name + ".txt")).string());
    ASSERT_FALSE(expected.empty()) << c.name;
    EXPECT_EQ(slurp(out.string()), expected)
        << c.name << ": the emitted text changed; if meant, run tools/emit-goldens.sh build/bin/ringmaster and read "
        << "the diff";
    EXPECT_THAT(r.out, HasSubstr("written to " + out.string())) << c.name;
  }
  EXPECT_EQ(frameworks.size(), 6u);  // every framework has golden cases
  fs::remove_all(dir);
}

TEST(CliEmit, AnEmittedExperimentSimulatesToTheSameStep) {
  const fs::path dir = temp_dir("rm_emit_experiment");
  for (const std::string layout : {" --set parallel.hp=2 --set parallel.cp=4 --set parallel.ring=double_ring --set "
                                   "parallel.window=2 --set parallel.placement=context_first",
                                   " --set parallel.dp=2 --set parallel.tp=2 --set parallel.cp=2 --set "
                                   "parallel.checkpoint=selective"}) {
    const std::string file = (dir / "exp.json").string();
    const auto original = run_cli("simulate --json" + kBase + layout + " --emit experiment -o " + file);
    ASSERT_EQ(original.exit_code, 0) << original.err;
    EXPECT_TRUE(nlohmann::json::parse(original.out).at("emit").at("exact").get<bool>());
    const auto again = run_cli("simulate --json " + file);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(step_of(again), step_of(original)) << layout;
    EXPECT_EQ(nlohmann::json::parse(again.out).at("experiment").at("parallel"),
              nlohmann::json::parse(original.out).at("experiment").at("parallel"));
    // Unchanged named parts are written by name.
    const auto written = nlohmann::json::parse(slurp(file));
    EXPECT_EQ(written.at("cluster"), "h200-1x8");
    EXPECT_TRUE(written.at("model").is_object());  // model.layers was overridden: inline
  }
  fs::remove_all(dir);
}

TEST(CliEmit, MegatronArgumentsReadBackToTheSameLayout) {
  const fs::path dir = temp_dir("rm_emit_megatron");
  for (const std::string layout :
       {" --set parallel.dp=2 --set parallel.tp=2 --set parallel.cp=2 --set parallel.partition=zigzag --set "
        "parallel.shuffle=once --set parallel.ring=ring",
        " --set parallel.hp=2 --set parallel.cp=4 --set parallel.partition=zigzag --set parallel.shuffle=once --set "
        "parallel.ring=ring --set parallel.checkpoint=none --set parallel.zero_stage=0",
        " --set parallel.hp=8 --set parallel.cp=1 --set parallel.ring=ring --set parallel.partition=zigzag --set "
        "parallel.shuffle=once"}) {
    const std::string args = (dir / "args.txt").string(), exp = (dir / "exp.json").string();
    const auto original = run_cli("simulate --json" + kBase + layout + " --emit megatron -o " + args);
    ASSERT_EQ(original.exit_code, 0) << original.err;
    EXPECT_TRUE(nlohmann::json::parse(original.out).at("emit").at("exact").get<bool>()) << layout;
    const auto imported = run_cli("import megatron" + kBase + " --args-file " + args + " -o " + exp);
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    EXPECT_TRUE(imported.err.empty()) << imported.err;  // every emitted argument is read
    const auto again = run_cli("simulate --json " + exp);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(nlohmann::json::parse(again.out).at("experiment").at("parallel"),
              nlohmann::json::parse(original.out).at("experiment").at("parallel"))
        << layout;
    EXPECT_EQ(step_of(again), step_of(original)) << layout;
  }
  fs::remove_all(dir);
}

TEST(CliEmit, TheNearestLayoutIsPredictedBesideTheAskedOne) {
  const std::string layout = " --set parallel.hp=2 --set parallel.cp=4 --set parallel.ring=double_ring --set "
                             "parallel.window=2";
  const auto r = run_cli("simulate --json" + kBase + layout + " --emit megatron");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto emit = nlohmann::json::parse(r.out).at("emit");
  EXPECT_FALSE(emit.at("exact").get<bool>());
  EXPECT_FALSE(emit.at("changes").empty());
  EXPECT_THAT(emit.at("text").get<std::string>(), HasSubstr("--cp-comm-type a2a+p2p"));
  // The nearest layout's figure is that layout's own simulation.
  std::string sets;
  for (const auto& [k, v] : emit.at("runs").items())
    sets += " --set parallel." + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  const auto nearest = run_cli("simulate --json" + kBase + sets);
  ASSERT_EQ(nearest.exit_code, 0) << nearest.err;
  EXPECT_EQ(emit.at("nearest_step_time_s").get<double>(), step_of(nearest));
  EXPECT_EQ(emit.at("step_time_s").get<double>(), step_of(r));
  // The text report says so, with both figures.
  const auto text = run_cli("simulate" + kBase + layout + " --emit megatron");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("megatron cannot run this layout; the nearest it runs is"));
  EXPECT_THAT(text.out, HasSubstr("for the nearest layout"));
}

TEST(CliEmit, PlanEmitsItsWinner) {
  const std::string shape = kBase + " --set parallel.cp=4 --set parallel.ring=ring --stripe-tokens 128 --top 2 "
                                    "--gpus 4 --jobs 2 --engine-confirm none";
  const auto r = run_cli("plan --json" + shape + " --emit yunchang");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& emit = j.at("emit");
  EXPECT_EQ(emit.at("framework"), "yunchang");
  EXPECT_THAT(emit.at("text").get<std::string>(), HasSubstr("set_seq_parallel_pg("));
  EXPECT_EQ(emit.at("step_time_s").get<double>(), j.at("best").at("analytic_step_time_s").get<double>());
  // Exact: the layout handed over is the winner's; else the nearest differs from it.
  EXPECT_EQ(emit.at("exact").get<bool>(), emit.at("runs") == j.at("best").at("config"));
}

TEST(CliEmit, BadInputIsOneLineAndExitTwoWithNothingWritten) {
  const fs::path dir = temp_dir("rm_emit_bad");
  const std::string out = (dir / "never.txt").string();
  struct Bad {
    std::string args, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"simulate" + kBase + " --emit deepspeed -o " + out, "--emit: expected one of experiment, megatron"},
           {"simulate" + kBase + " -o " + out, "expected --emit FRAMEWORK"},
           {"simulate" + kBase + " --set parallel.tp=2 --set parallel.cp=4 --emit yunchang -o " + out,
            "yunchang cannot run this layout"},
           {"simulate" + kBase + " --set parallel.tp=2 --set parallel.cp=4 --emit internevo -o " + out,
            "internevo cannot run this layout"},
           {"simulate" + kBase + " --set parallel.tp=2 --set parallel.cp=4 --emit mtraining -o " + out,
            "mtraining cannot run this layout"},
           {"import megatron" + kBase + " --args '--num-layers x --hidden-size 4096' -o " + out,
            "--num-layers: expected a positive integer, got \"x\""},
           {"import megatron" + kBase + " --args '--num-layers 3 --hidden-size 512 --num-attention-heads 8 "
            "--seq-length 8192' -o " + out,
            "expected --vocab-size"},
           {"import megatron" + kBase + " --args-file " + (kCases / "cases.txt").string() + " -o " + out,
            "--args-file " + (kCases / "cases.txt").string() + ": Megatron arguments:"},
           {"import megatron" + kBase + " --args '--num-layers 2' --args-file x -o " + out,
            "exactly one of --args or --args-file"},
           {"import megatron" + kBase + " --args '--num-layers 2 --hidden-size 2048 --num-attention-heads 16 "
            "--seq-length 8192 --vocab-size 1000 --context-parallel-size 4 --cp-comm-type ring' -o " + out,
            "--cp-comm-type: expected p2p, a2a, allgather or a2a+p2p"},
           {"import megatron" + kBase + " --args '--num-layers 2 --hidden-size 2048 --num-attention-heads 16 "
            "--seq-length 8192 --vocab-size 1000 --context-parallel-size 8 --cp-comm-type a2a+p2p "
            "--hierarchical-context-parallel-sizes 2 2' -o " + out,
            "expected a product equal to --context-parallel-size 8"},
       }) {
    const auto r = run_cli(b.args);
    EXPECT_EQ(r.exit_code, 2) << b.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(b.says)) << b.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << b.args;
    EXPECT_FALSE(fs::exists(out)) << b.args;
  }
  fs::remove_all(dir);
}

TEST(CliEmit, ImportListsWhatItDidNotReadInOneWarning) {
  const auto r = run_cli("import megatron --json" + kBase +
                         " --args '--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
                         "--num-query-groups 8 --ffn-hidden-size 14336 --untie-embeddings-and-output-weights --swiglu "
                         "--seq-length 65536 --context-parallel-size 8 --cp-comm-type allgather --lr 1e-4 "
                         "--pipeline-model-parallel-size 2 --recompute-granularity selective'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* s : {"--lr 1e-4 (not modelled)", "--pipeline-model-parallel-size 2", "--cp-comm-type allgather",
                        "--recompute-granularity selective"})
    EXPECT_THAT(r.err, HasSubstr(s));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("experiment").at("model"), "llama3-8b");  // the shipped model of that shape
  EXPECT_EQ(j.at("experiment").at("parallel").at("cp"), 8);
  EXPECT_EQ(j.at("experiment").at("parallel").at("checkpoint"), "none");
  EXPECT_EQ(j.at("ignored").size(), 4u);
}

TEST(CliEmit, EveryNewOptionHasHelp) {
  for (const char* cmd : {"simulate --help", "plan --help", "import --help"}) {
    const auto r = run_cli(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_FALSE(r.out.empty()) << cmd;
  }
  EXPECT_THAT(run_cli("simulate --help").out, HasSubstr("--emit"));
  EXPECT_THAT(run_cli("import --help").out, HasSubstr("--args-file"));
  const auto other = run_cli("import deepspeed --args '--num-layers 2'");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_THAT(other.err, HasSubstr("import: expected the framework megatron"));
}

}  // namespace
}  // namespace rm::test
