// Replay of the shared recorded traces (../shared/data/kineto; skipped when
// absent): without a what-if every replayed step is the recorded one (to
// rounding), and a what-if on the intra-node links moves the NCCL time the
// right way and never makes a step faster when the links get slower.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/replay/replay.hpp"
#include "sim/replay/replay_cluster.hpp"

namespace rm::replay {
namespace {

const std::string kDir = std::string(RINGMASTER_SOURCE_DIR) + "/../shared/data/kineto/";

struct Case {
  std::vector<std::string> files;
  std::string cluster;
};

ReplayResult replay_on(const ReplayPlan& plan, const std::string& cluster, const std::vector<std::string>& sets) {
  const Cluster c = load_cluster(ConfigStore(), cluster, sets);
  return run_replay(plan, topology::Topology(c), replay_cost_model(c), engine::EngineKind::analytic);
}

TEST(ReplayTraces, SharedTracesReproduceTheirStepsAndRespondToWhatIfs) {
  if (!std::filesystem::exists(kDir + "nccl_parser_config__nccl_data.json.gz")) GTEST_SKIP() << "no " << kDir;
  const std::vector<Case> cases{
      {{"nccl_parser_config__nccl_data.json.gz"}, "a100-80g-1x8"},
      {{"trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"}, "a100-80g-1x8"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> paths;
    for (const auto& f : c.files) paths.push_back(kDir + f);
    const traces::KinetoImport imp = traces::read_kineto(paths);
    const Cluster base = load_cluster(ConfigStore(), c.cluster, {});
    const ReplayPlan plan = build_replay(imp, topology::Topology(base), replay_cost_model(base));
    const ReplayResult same = replay_on(plan, c.cluster, {});
    const ReplayResult slow = replay_on(plan, c.cluster, {"cluster.intra_node.bandwidth_GBps=30"});
    const ReplayResult fast = replay_on(plan, c.cluster, {"cluster.intra_node.bandwidth_GBps=600"});
    ASSERT_FALSE(same.ranks.empty()) << c.files[0];
    for (size_t r = 0; r < same.ranks.size(); ++r)
      for (size_t s = 0; s < same.ranks[r].steps.size(); ++s) {
        const StepResult& st = same.ranks[r].steps[s];
        EXPECT_FALSE(st.whole_trace) << c.files[0];
        EXPECT_NEAR(st.replayed_s, st.recorded_s, 1e-9 * st.recorded_s) << c.files[0] << " " << st.name;
        EXPECT_NEAR(st.gpu_replayed_s, st.gpu_recorded_s, 1e-9 * st.recorded_s) << c.files[0] << " " << st.name;
        EXPECT_NEAR(st.nccl_replayed_s, st.nccl_recorded_s, 1e-9 * st.recorded_s) << c.files[0] << " " << st.name;
        EXPECT_GE(slow.ranks[r].steps[s].replayed_s, st.replayed_s - 1e-12) << c.files[0] << " " << st.name;
        EXPECT_LE(fast.ranks[r].steps[s].replayed_s, st.replayed_s + 1e-12) << c.files[0] << " " << st.name;
        if (plan.calls.missing_members + plan.calls.resimulated > 0) {  // re-simulated calls in the step move
          EXPECT_GT(slow.ranks[r].steps[s].nccl_replayed_s, st.nccl_replayed_s) << c.files[0] << " " << st.name;
          EXPECT_LT(fast.ranks[r].steps[s].nccl_replayed_s, st.nccl_replayed_s) << c.files[0] << " " << st.name;
        } else {
          EXPECT_EQ(slow.ranks[r].steps[s].nccl_replayed_s, st.nccl_replayed_s) << c.files[0] << " " << st.name;
        }
      }
  }
}

}  // namespace
}  // namespace rm::replay
