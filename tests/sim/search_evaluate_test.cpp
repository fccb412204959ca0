// search::evaluate on many threads gives, point for point, what one fresh
// Session gives serially; a point that cannot run says why without stopping the rest.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/config/config_store.hpp"
#include "sim/generate/footprint.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/search/evaluate.hpp"

namespace rm::search {
namespace {

Experiment variant(std::vector<std::string> more) {
  std::vector<std::string> all{"workload.seq_len=8k", "model.layers=2", "scope=layer"};
  all.insert(all.end(), more.begin(), more.end());
  return load_experiment(ConfigStore({std::string(RINGMASTER_SOURCE_DIR) + "/configs"}), "", all);
}

std::vector<Experiment> points() {
  std::vector<Experiment> p;
  for (const char* ring : {"ring", "hierarchical"})
    for (const char* part : {"zigzag", "stripe", "contiguous"})
      for (const char* seq : {"8k", "16k"})
        p.push_back(variant({std::string("parallel.ring=") + ring, std::string("parallel.partition=") + part,
                             std::string("workload.seq_len=") + seq}));
  p.push_back(variant({"parallel.ring=double_ring", "parallel.window=4"}));
  return p;
}

TEST(Evaluate, ThreadsGiveTheSerialResultsInInputOrder) {
  const std::vector<Experiment> in = points();
  EvaluateOptions o;
  o.jobs = 3;
  int64_t last_done = 0, calls = 0;
  o.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, static_cast<int64_t>(in.size()));
    EXPECT_EQ(done, last_done + 1);
    last_done = done;
    ++calls;
  };
  const std::vector<Outcome> got = evaluate(in, o);
  ASSERT_EQ(got.size(), in.size());
  EXPECT_EQ(calls, static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    pipeline::Session fresh;
    const Outcome want = evaluate_one(in[i], engine::EngineKind::analytic, fresh);
    ASSERT_TRUE(got[i].ok) << got[i].error;
    EXPECT_EQ(report::to_json(got[i].report).dump(), report::to_json(want.report).dump()) << "point " << i;
    EXPECT_EQ(got[i].ops, want.ops);
    EXPECT_EQ(got[i].generator, want.generator);
    EXPECT_GT(got[i].report.step_time_s, 0);
  }
}

// A cluster axis varied slowest (equal Schedule inputs far apart in the input):
// each point is still what the uncached Session::simulate gives.
TEST(Evaluate, ClusterWhatIfsAnywhereInTheGridGiveFreshFigures) {
  std::vector<Experiment> in;
  for (const char* nic : {"25", "200", "800"})
    for (const char* part : {"zigzag", "stripe"})
      for (const char* ring : {"ring", "hierarchical"})
        in.push_back(variant({std::string("cluster.nic.bandwidth_Gbps=") + nic,
                              std::string("parallel.partition=") + part, std::string("parallel.ring=") + ring}));
  EvaluateOptions o;
  o.jobs = 2;
  const std::vector<Outcome> got = evaluate(in, o);
  ASSERT_EQ(got.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const pipeline::Simulation want = pipeline::Session().simulate(in[i], engine::EngineKind::analytic);
    ASSERT_TRUE(got[i].ok) << got[i].error;
    EXPECT_EQ(report::to_json(got[i].report).dump(), report::to_json(want.report).dump()) << "point " << i;
    EXPECT_EQ(got[i].ops, int64_t(want.schedule.ops.size()));
  }
}

TEST(Evaluate, APointThatCannotRunSaysWhyAndTheOthersStillRun) {
  // A window that does not divide cp, set past the loader's check: the generator refuses it.
  Experiment bad = variant({"parallel.ring=double_ring", "parallel.window=4"});
  bad.parallel.window = 5;
  std::vector<Experiment> in{variant({}), bad, variant({})};
  EvaluateOptions o;
  o.jobs = 2;
  const std::vector<Outcome> got = evaluate(in, o);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].ok);
  EXPECT_FALSE(got[1].ok);
  EXPECT_NE(got[1].error.find("window"), std::string::npos) << got[1].error;
  EXPECT_TRUE(got[2].ok);
  EXPECT_EQ(report::to_json(got[0].report).dump(), report::to_json(got[2].report).dump());
}

// A point whose whole step would not fit this machine's memory but whose
// streamed run would is streamed: the whole run's figures (but bound_by, which a
// streamed run does not give); with streaming off it is refused, saying why.
TEST(Evaluate, APointTooLargeToHoldWholeIsStreamed) {
  const Experiment e = variant({"scope=step", "parallel.cp=8", "parallel.dp=2", "model.layers=8"});
  const auto whole = generate::estimate_footprint(e, generate::RunKind::simulate);
  const auto window = generate::estimate_stream_footprint(e, false);
  ASSERT_LT(window.bytes, whole.bytes);
  pipeline::Session fresh;
  const Outcome want = evaluate_one(e, engine::EngineKind::analytic, fresh);
  ASSERT_TRUE(want.ok) << want.error;
  ASSERT_TRUE(want.report.bound_by.has_value());

  const int64_t limit = (window.bytes + whole.bytes) / 2;
  const Experiment small = variant({"scope=attention_fwd"});
  ASSERT_LT(generate::estimate_footprint(small, generate::RunKind::simulate).bytes, limit);
  const std::string between = std::to_string(limit);
  ::setenv("RINGMASTER_MEMORY_BYTES", between.c_str(), 1);
  EvaluateOptions o;
  o.jobs = 2;
  const std::vector<Outcome> got = evaluate({e, small}, o);
  o.stream = false;
  const std::vector<Outcome> refused = evaluate({e}, o);
  ::unsetenv("RINGMASTER_MEMORY_BYTES");

  ASSERT_TRUE(got[0].ok) << got[0].error;
  EXPECT_TRUE(got[0].streamed);
  EXPECT_FALSE(got[1].streamed);  // the small one fits whole
  EXPECT_EQ(simulated_as(got[0]), "streamed");
  EXPECT_EQ(simulated_as(got[1]), "whole") << got[1].error;
  EXPECT_EQ(simulated_as(refused[0]), "");
  EXPECT_EQ(got[0].ops, want.ops);
  EXPECT_EQ(got[0].generator, want.generator);
  ASSERT_TRUE(got[0].report.bound_by.has_value());
  EXPECT_EQ(report::to_json(got[0].report).dump(), report::to_json(want.report).dump());
  ASSERT_FALSE(refused[0].ok);
  EXPECT_NE(refused[0].error.find("needs ~"), std::string::npos) << refused[0].error;
}

TEST(Evaluate, WorkerCountIsAtLeastOne) {
  EXPECT_GE(worker_count(0), 1);
  EXPECT_EQ(worker_count(5), 5);
  EXPECT_TRUE(evaluate({}, EvaluateOptions{}).empty());
}

}  // namespace
}  // namespace rm::search
