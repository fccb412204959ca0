// ringmaster-run --backend cuda refuses bad input on every rank with one line
// and exit 2, before touching a device: the checks that hold on any machine,
// with or without a GPU (docs/runtime-cuda.md, "Bad input"). Those of the
// backend itself are skipped where ringmaster-run was built without it.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/run_cli.hpp"

namespace {

using ::testing::HasSubstr;

struct Ran {
  int exit_code = -1;
  std::string err;
};

Ran run(const std::string& cmd) {
  static int counter = 0;
  const std::string errfile = "/tmp/rm_cuda_refusal_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  Ran r;
  FILE* p = ::popen((cmd + " >/dev/null 2>" + errfile).c_str(), "r");
  if (!p) return r;
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = rm::test::slurp(errfile);
  std::remove(errfile.c_str());
  return r;
}

int error_lines(const std::string& err) {
  int n = 0;
  for (size_t at = err.find("ringmaster-run: error:"); at != std::string::npos; at = err.find("ringmaster-run: error:", at + 1)) ++n;
  return n;
}

class CudaRefusal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(rm::test::temp_dir("ringmaster_cuda_refusal"));
    schedule_ = new std::string((*dir_ / "two.json").string());
    const auto r = rm::test::run_cli(
        "schedule --set cluster=h200-1x8 --set workload.seq_len=2k --set workload.pattern=dense-causal "
        "--set parallel.cp=2 --set parallel.ring=ring --set parallel.partition=zigzag --set scope=attention_fwd_bwd "
        "--set model.layers=1 -o '" + *schedule_ + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Ran probe = run(std::string(RINGMASTER_RUN_BIN) + " --schedule '" + *schedule_ + "' --backend cuda --emulate-ranks 3");
    built_ = probe.err.find("built without the cuda backend") == std::string::npos;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete schedule_;
  }
  static std::string mpirun(int np) {
    return std::string(RINGMASTER_MPIRUN) + " --allow-run-as-root --oversubscribe -np " + std::to_string(np) + " " +
           RINGMASTER_RUN_BIN + " --schedule '" + *schedule_ + "'";
  }
  static inline std::filesystem::path* dir_ = nullptr;
  static inline std::string* schedule_ = nullptr;
  static inline bool built_ = false;
};

TEST_F(CudaRefusal, EmulatedRankCountMustMatchTheSchedule) {
  if (!built_) GTEST_SKIP() << "no cuda backend in this build";
  const Ran r = run(mpirun(1) + " --backend cuda --emulate-ranks 3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the Schedule has 2 ranks but --emulate-ranks 3"));
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
}

TEST_F(CudaRefusal, EmulationRunsInOneProcess) {
  if (!built_) GTEST_SKIP() << "no cuda backend in this build";
  const Ran r = run(mpirun(2) + " --backend cuda --emulate-ranks 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--emulate-ranks runs every rank in one process; 2 processes were started"));
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
}

TEST_F(CudaRefusal, EmulationNeedsTheCudaBackend) {
  const Ran r = run(mpirun(1) + " --backend cpu --emulate-ranks 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--emulate-ranks needs --backend cuda"));
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
}

// Without a GPU every rank refuses, naming the missing device; with one the run goes ahead (skipped).
TEST_F(CudaRefusal, NoDeviceIsOneLineOnEveryRank) {
  if (!built_) GTEST_SKIP() << "no cuda backend in this build";
  const Ran r = run(mpirun(2) + " --backend cuda --iters 1 --warmup 0");
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("sees no CUDA device"));
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
}

}  // namespace
