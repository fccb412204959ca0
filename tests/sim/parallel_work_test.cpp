// Per-head work on several threads (rm::parallel_for): every index once, the
// first failure rethrown; and the top-p patterns, pair costs, imbalance and
// Schedule of an experiment identical whatever the thread count.
#include "sim/config/parallel_for.hpp"

#include <atomic>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "sim/pipeline/pipeline.hpp"
#include "sim/report/step_report.hpp"
#include "sim/placement/device_map.hpp"
#include "tests/support/generate_support.hpp"

namespace rm {
namespace {

TEST(ParallelFor, RunsEveryIndexOnceOnAnyThreadCount) {
  for (size_t n : {0, 1, 2, 7, 100})
    for (int threads : {0, 1, 2, 3, 8}) {
      std::vector<std::atomic<int>> runs(n);
      parallel_for(n, threads, [&](size_t i) { runs[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << n << " " << threads << " " << i;
    }
}

TEST(ParallelFor, RethrowsTheLowestFailingIndexAfterRunningTheRest) {
  for (int threads : {1, 4}) {
    std::atomic<int> ran{0};
    try {
      parallel_for(50, threads, [&](size_t i) {
        ran.fetch_add(1);
        if (i == 13 || i == 31) throw std::runtime_error("index " + std::to_string(i));
      });
      ADD_FAILURE() << "nothing thrown";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "index 13");
    }
    // Serially the loop stops at the first failure; on threads every index runs.
    EXPECT_EQ(ran.load(), threads == 1 ? 14 : 50);
  }
}

Experiment topp(std::vector<std::string> more = {}) {
  std::vector<std::string> sets{"workload.pattern=topp-synthetic", "workload.seq_len=65536", "model.layers=3",
                                "parallel.cp=8", "parallel.partition=stripe", "parallel.ring=ring",
                                "cluster.gpus_per_node=8"};
  sets.insert(sets.end(), more.begin(), more.end());
  return generate::testing::small_experiment(sets);
}

TEST(ParallelWork, TopPHeadsArePatternForPatternTheSameOnAnyThreadCount) {
  const Experiment e = topp();
  auto serial = pipeline::build_patterns(e);
  auto threaded = pipeline::build_patterns(e);
  threaded.set_threads(4);
  ASSERT_EQ(serial.layers_built(), 0);  // lazy: the layers below are built here, on 1 and 4 threads
  for (int l = 0; l < e.model.layers; ++l)
    for (int h = 0; h < e.model.heads; ++h) EXPECT_TRUE(serial.head(l, h) == threaded.head(l, h)) << l << " " << h;
  EXPECT_EQ(serial.distinct_heads(), threaded.distinct_heads());
}

TEST(ParallelWork, PairCostsImbalanceAndScheduleDoNotDependOnTheThreadCount) {
  const Experiment e = topp();
  pipeline::Session one, three;
  three.set_threads(3);
  // A matrix budget of two heads: the rest of each shard is counted for the call only.
  for (auto* s : {&one, &three}) s->work().set_matrix_budget(2 * 8 * 8 * int64_t(sizeof(sparsity::TileCost)));
  const auto& m1 = one.patterns(e);
  const auto& m3 = three.patterns(e);
  const auto& ranks = one.work().partition(e.parallel.partition, e, m1);
  ASSERT_EQ(ranks, three.work().partition(e.parallel.partition, e, m3));
  const auto shard = placement::head_shard(e.model, e.parallel, 0, 0);
  for (int l = 0; l < e.model.layers; ++l) {
    const auto a = one.work().head_rank_pairs(m1, l, shard, ranks, {128, 128});
    const auto b = three.work().head_rank_pairs(m3, l, shard, ranks, {128, 128});
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << l << " " << i;
  }
  EXPECT_EQ(one.work().pair_cost_builds(), three.work().pair_cost_builds());
  EXPECT_EQ(one.work().matrix_bytes(), three.work().matrix_bytes());
  EXPECT_GT(one.work().pair_cost_builds(), 0);

  const Experiment step = topp({"scope=step"});
  const schedule::Schedule s1 = one.schedule(step), s3 = three.schedule(step);
  EXPECT_TRUE(s1.ops == s3.ops);
  EXPECT_TRUE(s1.attentions == s3.attentions);
  EXPECT_TRUE(one.imbalance(e, {Partition::stripe, Partition::balanced}) ==
              three.imbalance(e, {Partition::stripe, Partition::balanced}));
}

// The report prepared beside the engine is the report prepared after it, on both engines.
TEST(ParallelWork, ASimulationReportsTheSameWithItsPreparationOnASecondThread) {
  const Experiment e = topp({"scope=layer"});
  pipeline::Session session;
  const schedule::Schedule s = session.schedule(e);
  for (const auto kind : {engine::EngineKind::analytic, engine::EngineKind::simgrid}) {
    const auto one = pipeline::simulate_schedule(e, s, kind, pipeline::WithTimeline::no, 1);
    const auto two = pipeline::simulate_schedule(e, s, kind, pipeline::WithTimeline::no, 2);
    EXPECT_GT(one.report.step_time_s, 0.0);
    EXPECT_EQ(report::to_json(one.report).dump(), report::to_json(two.report).dump());
  }
}

}  // namespace
}  // namespace rm
