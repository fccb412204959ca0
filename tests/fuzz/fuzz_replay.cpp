// libFuzzer harness: `ringmaster replay` across several ranks: up to four
// Kineto traces (the input split at NUL bytes, one rank each) imported
// together (parse_kineto: ranks, collectives matched across them), the replay
// Schedule built on an 8-GPU H200 node, run with the analytic engine, and its
// replayed Timeline written as Chrome JSON. As the CLI, a refusal of
// build_replay is a std::runtime_error (a rank beyond the cluster) or a
// ScheduleError (recorded dependencies that do not make a runnable Schedule).
// Expected answers: a replay, or those / rm::traces::TraceError / rm::ConfigError.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/json_reader.hpp"  // ConfigError
#include "sim/config/config_store.hpp"
#include "sim/replay/replay.hpp"
#include "sim/replay/replay_cluster.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/topology/topology.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/kineto.hpp"
#include "traces/trace_error.hpp"
#include "tests/fuzz/fuzz_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rm::ConfigStore store;
  static const rm::Cluster cluster = rm::replay::load_cluster(store, "h200-1x8", {});
  static const rm::topology::Topology topology(cluster);
  static const rm::cost::CostModel model = rm::replay::replay_cost_model(cluster);
  std::vector<std::pair<std::string, std::string>> ranks;
  for (std::string_view part : rm::fuzz::split_at_nul(rm::fuzz::as_text(data, size), 4))
    ranks.emplace_back("rank" + std::to_string(ranks.size()) + ".json", std::string(part));
  rm::traces::KinetoImport imp;
  try {
    imp = rm::traces::parse_kineto(ranks);
  } catch (const rm::traces::TraceError&) {
    return 0;
  }
  rm::replay::ReplayPlan plan;
  try {
    plan = rm::replay::build_replay(imp, topology, model);
  } catch (const std::runtime_error&) {  // ScheduleError, ConfigError and the documented rank refusal
    return 0;
  }
  try {
    const rm::replay::ReplayResult res = rm::replay::run_replay(plan, topology, model, rm::engine::EngineKind::analytic);
    (void)rm::traces::to_chrome_json(rm::replay::replayed_timeline(imp, plan, res, rm::traces::Source::analytic));
  } catch (const rm::ConfigError&) {
  } catch (const rm::traces::TraceError&) {
  }
  return 0;
}
