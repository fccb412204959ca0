// `simulate`, `schedule` and `imbalance` estimate the memory of a run before starting it
// (sim/generate/footprint.hpp) and refuse one that will not fit at once: one
// line naming the estimate and the machine's memory, exit code 2, nothing built.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/run_cli.hpp"

namespace {

using rm::test::run_cli;

// A 4,096-GPU step at 4M tokens, on a machine said to have 1 GB.
const std::string kHuge =
    "--set cluster.nodes=512 --set parallel.dp=32 --set parallel.cp=128 --set workload.seq_len=4m";

struct SmallMachine {
  SmallMachine() { ::setenv("RINGMASTER_MEMORY_BYTES", "1000000000", 1); }
  ~SmallMachine() { ::unsetenv("RINGMASTER_MEMORY_BYTES"); }
};

TEST(CliFootprint, HugeSimulationRefusedWithTheEstimateAndTheMachinesMemory) {
  SmallMachine m;
  auto r = run_cli("simulate " + kHuge);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("this simulation needs ~"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" ops), this machine has 1.0 GB"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
}

TEST(CliFootprint, HugeScheduleRefusedBeforeWritingAnything) {
  SmallMachine m;
  const auto dir = rm::test::temp_dir("cli_footprint");
  auto r = run_cli("schedule " + kHuge + " -o s.json.gz", dir.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("this schedule needs ~"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "s.json.gz"));
}

TEST(CliFootprint, HugeImbalanceRefusedNamingThePairCostTables) {
  SmallMachine m;
  // cp = 1,024: a 1,024 x 1,024 table per head pattern (36 layers x 16 heads) and partition.
  auto r = run_cli("imbalance --set cluster.nodes=128 --set parallel.cp=1024 --set workload.seq_len=4m");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("this imbalance report needs ~"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(pair-cost tables), this machine has 1.0 GB"), std::string::npos) << r.err;
}

TEST(CliFootprint, SmallRunFitsTheSameMachine) {
  SmallMachine m;
  auto r = run_cli("schedule --json --set model.layers=2 --set workload.seq_len=16384");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
