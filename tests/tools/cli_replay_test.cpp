// `ringmaster replay` through the real binary: a small Kineto trace written
// here replays exactly (table and --json), bad input is one line and exit 2
// with nothing on stdout, and the shared recorded traces (skipped when
// ../shared/data/kineto is absent) replay within the bounds docs/replay.md gives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// One rank, one step: two kernels launched 30 us apart (the second waits 5 us
// for its launch), a cudaDeviceSynchronize on the second, 20 us of CPU after it.
std::string tiny_trace(bool with_gpu = true, bool with_devices = true) {
  json ev = json::array();
  auto x = [&](const std::string& cat, const std::string& name, int pid, int tid, double ts, double dur, json args) {
    ev.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur},
                  {"args", args}});
  };
  auto flow = [&](int id, int pid, int tid, double ts, bool start) {
    ev.push_back({{"ph", start ? "s" : "f"}, {"id", id}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"cat", "ac2g"},
                  {"name", "ac2g"}, {"bp", "e"}});
  };
  x("user_annotation", "ProfilerStep#3", 100, 100, 1000, 200, {{"External id", 1}});
  x("cpu_op", "aten::mm", 100, 100, 1005, 20, {{"External id", 2}});
  x("cuda_runtime", "cudaLaunchKernel", 100, 100, 1010, 5, {{"External id", 2}, {"correlation", 11}});
  x("cpu_op", "aten::relu", 100, 100, 1040, 10, {{"External id", 3}});
  x("cuda_runtime", "cudaLaunchKernel", 100, 100, 1042, 5, {{"External id", 3}, {"correlation", 12}});
  x("cuda_runtime", "cudaDeviceSynchronize", 100, 100, 1050, 130, {{"correlation", 13}});
  if (with_gpu) {
    x("kernel", "volta_sgemm_128x64_nn", 0, 7, 1020, 60,
      {{"correlation", 11}, {"stream", 7}, {"device", 0}, {"External id", 2}});
    x("kernel", "relu_kernel", 0, 7, 1080, 95, {{"correlation", 12}, {"stream", 7}, {"device", 0}, {"External id", 3}});
    flow(11, 100, 100, 1010, true);
    flow(11, 0, 7, 1020, false);
    flow(12, 100, 100, 1042, true);
    flow(12, 0, 7, 1080, false);
  }
  json t{{"schemaVersion", 1}, {"traceEvents", ev}};
  if (with_devices) t["deviceProperties"] = json::array({{{"id", 0}, {"name", "NVIDIA A100-SXM4-40GB"}}});
  t["distributedInfo"] = {{"backend", "nccl"}, {"rank", 0}, {"world_size", 1}};
  return t.dump();
}

// 'path' for the shell (one string built by appends: GCC 12 warns falsely on "'" + s + "'").
std::string q(const std::string& s) {
  std::string out = "'";
  out += s;
  out += "'";
  return out;
}

struct Dir {
  std::filesystem::path dir = temp_dir("rm_cli_replay");
  ~Dir() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

TEST(CliReplay, HelpNamesTheOptions) {
  const auto r = run_cli("replay --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt : {"--cluster", "--set", "--engine", "--json"}) EXPECT_THAT(r.out, HasSubstr(opt));
}

TEST(CliReplay, ATinyTraceReplaysItsStepExactly) {
  const Dir d;
  const std::string f = d.write("tiny.json", tiny_trace());
  const auto table = run_cli("replay " + q(f));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("ProfilerStep#3"));
  EXPECT_THAT(table.out, HasSubstr("+0.00%"));
  EXPECT_THAT(table.out, HasSubstr("a100-"));  // the default cluster matches the recorded GPU
  for (const char* engine : {"analytic", "simgrid"}) {
    const auto r = run_cli("replay --json --engine " + std::string(engine) + " " + q(f));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const json& st = j.at("ranks").at(0).at("steps").at(0);
    EXPECT_EQ(j.at("ranks").at(0).at("rank"), 0);
    EXPECT_EQ(st.at("name"), "ProfilerStep#3");
    EXPECT_NEAR(st.at("recorded_s").get<double>(), 200e-6, 1e-12);
    EXPECT_NEAR(st.at("replayed_s").get<double>(), 200e-6, 1e-12) << engine;
  }
  // --trace: the replayed GPU events, as recorded, in a Chrome trace.
  const std::string out = (d.dir / "replayed.json").string();
  const auto t = run_cli("replay --trace " + q(out) + " " + q(f));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const json tr = json::parse(slurp(out));
  std::vector<std::string> names;
  for (const json& e : tr.at("traceEvents"))
    if (e.value("ph", "") == "X") names.push_back(e.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"volta_sgemm_128x64_nn", "relu_kernel"}));
  // A what-if on the cluster changes nothing here (no communication).
  const auto w = run_cli("replay --json --cluster a100-40g-4x8-hdr --set cluster.nic.bandwidth_Gbps=400 " + q(f));
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NEAR(json::parse(w.out)["ranks"][0]["steps"][0]["replayed_s"].get<double>(), 200e-6, 1e-12);
}

TEST(CliReplay, BadInputIsOneLineAndExit2) {
  const Dir d;
  const std::string good = d.write("good.json", tiny_trace());
  const std::string text = tiny_trace();
  const std::map<std::string, std::string> cases{
      {q((d.dir / "missing.json").string()), "missing.json"},
      {q(d.write("cut.json", text.substr(0, text.size() / 2))), "cut.json"},
      {q(d.write("nogpu.json", tiny_trace(false))), "nogpu.json"},
      {q(d.write("nodev.json", tiny_trace(true, false))), "--cluster"},
      {"--set workload.seq_len=8k " + q(good), "cluster"},
      {"--cluster no-such-cluster " + q(good), "no-such-cluster"},
      {"--engine fast " + q(good), "--engine"},
  };
  for (const auto& [args, what] : cases) {
    const auto r = run_cli("replay " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_THAT(r.err, HasSubstr(what)) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

// The shared recorded traces: every replayed step within the bound of
// docs/replay.md (5%, the goal, where the trace allows it).
TEST(CliReplay, SharedTracesReplayWithinTheirBounds) {
  const std::string dir = std::string(RINGMASTER_SOURCE_DIR) + "/../shared/data/kineto";
  if (!std::filesystem::exists(dir + "/nccl_parser_config__nccl_data.json.gz")) GTEST_SKIP() << "no " << dir;
  struct Case {
    std::string files, cluster;
    double bound;
  };
  auto f = [&](const std::string& name) { return q(dir + "/" + name); };
  const std::vector<Case> cases{
      {f("nccl_parser_config__nccl_data.json.gz"), "a100-80g-1x8", 0.05},
      {f("df_index_resolver__df_index_resolver.json.gz"), "v100-dgx1-1x8", 0.05},
      {f("trace_filter__sampled_rank-0.json.gz") + " " + f("trace_filter__sampled_rank-1.json.gz"), "a100-80g-1x8", 0.05},
  };
  // Files of two different jobs: the reader refuses them, in one line.
  const auto mixed = run_cli("replay --cluster a100-80g-1x8 " + f("nccl_parser_config__nccl_data.json.gz") + " " +
                             f("df_index_resolver__df_index_resolver.json.gz"));
  EXPECT_EQ(mixed.exit_code, 2) << mixed.err;
  EXPECT_EQ(mixed.out, "");
  EXPECT_EQ(std::count(mixed.err.begin(), mixed.err.end(), '\n'), 1) << mixed.err;
  for (const auto& c : cases) {
    const auto r = run_cli("replay --json --cluster " + c.cluster + " " + c.files);
    ASSERT_EQ(r.exit_code, 0) << c.files << ": " << r.err;
    const json j = json::parse(r.out);
    ASSERT_FALSE(j.at("ranks").empty()) << c.files;
    for (const json& rank : j.at("ranks"))
      for (const json& st : rank.at("steps")) {
        const double rec = st.at("recorded_s"), rep = st.at("replayed_s");
        EXPECT_LE(std::abs(rep / rec - 1), c.bound) << c.files << " rank " << rank.at("rank") << " " << st.at("name");
      }
  }
}

}  // namespace
}  // namespace rm::test
