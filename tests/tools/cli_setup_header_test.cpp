// What every report's head says of the setup: the pattern, the attention kernel
// (and why it was chosen) and the framework profile in effect; a dense mask on
// the block-sparse kernel warns in one stderr line; a narrow scope's tokens/s is
// labelled as what it is.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/run_cli.hpp"

namespace rm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSmall =
    " --set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set workload.seq_len=32k --set model.layers=2";

TEST(CliSetupHeader, SimulateNamesPatternKernelWhyAndFramework) {
  const auto r = run_cli("simulate rfa-llama3-8b-64k-a100");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pattern dense-causal (dense_causal), attention kernel fa2, framework profile none "
                               "(named by the experiment)"));
  // Named by nobody: the default of the mask and the GPU, said with its reason.
  const auto d = run_cli("simulate usp-llama3-8b-208k --set scope=attention_fwd");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr("attention kernel fa2, framework profile none (fa2: FlashAttention-2, the default "
                               "for a dense_causal mask on ampere GPUs)"));
  EXPECT_EQ(d.err, "");
}

TEST(CliSetupHeader, PlanAndSweepNameThemToo) {
  const auto p = run_cli("plan --engine-confirm none --gpus 4 --jobs 2 --stripe-tokens 128 --top 2 --set "
                         "cluster=h200-1x8 --set workload.seq_len=8k --set model.layers=2 --set parallel.cp=4 --set "
                         "parallel.ring=ring --set workload.pattern=dense-causal --set kernel.attention=fa3");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("pattern dense-causal (dense_causal), attention kernel fa3, framework profile none"));
  const auto s = run_cli("sweep --quiet --grid workload.pattern=dense-causal,sliding-window" + kSmall +
                         " --set kernel.attention=fa3 --set scope=attention_fwd");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("pattern dense-causal (dense_causal), attention kernel fa3, framework profile none; "
                               "pattern sliding-window (sliding_window), attention kernel fa3"));
}

TEST(CliSetupHeader, ADenseMaskOnBlockSparseWarnsInOneLine) {
  const auto r = run_cli("simulate --json" + kSmall + " --set workload.pattern=dense-causal --set scope=attention_fwd");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ringmaster: warning: a dense_causal mask priced on block_sparse"));
  EXPECT_THAT(r.err, HasSubstr("--set kernel.attention=fa3"));  // H200: Hopper
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const auto quiet = run_cli("simulate --json" + kSmall + " --set scope=attention_fwd");  // vertical-slash: its kernel
  EXPECT_EQ(quiet.err, "");
}

TEST(CliSetupHeader, ANarrowScopesTokensPerSecondSaysWhatItCounts) {
  const auto a = run_cli("simulate" + kSmall + " --set scope=attention_fwd");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_THAT(a.out, HasSubstr("per attention call (forward) (scope attention_fwd: not a training throughput)"));
  const auto s = run_cli("simulate" + kSmall);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, Not(HasSubstr("not a training throughput")));
}

}  // namespace
}  // namespace rm::test
