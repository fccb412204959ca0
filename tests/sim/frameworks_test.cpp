// sim/frameworks without the CLI: every framework's emission over a grid of
// layouts is either a layout the config accepts (the nearest one, each change
// named) or a refusal naming the framework; exact emissions change nothing;
// the Megatron argument reader's word splitting and mapping rules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config/json_reader.hpp"
#include "sim/frameworks/framework.hpp"
#include "sim/frameworks/megatron_import.hpp"

namespace rm::frameworks {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kSmall = {"cluster=h200-1x8", "workload.seq_len=16k", "model.layers=2"};

Experiment layout(std::vector<std::string> sets) {
  std::vector<std::string> all = kSmall;
  all.insert(all.end(), sets.begin(), sets.end());
  return load_experiment(ConfigStore(), "", all);
}

TEST(Frameworks, EveryEmissionIsAValidLayoutOrARefusalNamingTheFramework) {
  const ConfigStore store;
  int exact = 0, nearest = 0, refused = 0;
  for (const char* hp_cp : {"1x8", "2x4", "8x1", "4x2", "1x4", "2x2"})
    for (const char* partition : {"contiguous", "zigzag", "stripe", "balanced"})
      for (const char* ring : {"ring", "double_ring", "hierarchical"})
        for (const char* tp : {"1", "2"}) {
          const std::string hp(1, hp_cp[0]), cp(1, hp_cp[2]);
          if (std::string(tp) == "2" && hp == "8") continue;  // 16 GPUs: more than the node
          const int world = std::stoi(hp) * std::stoi(cp) * std::stoi(tp);
          if (world > 8) continue;
          Experiment e;
          try {
            e = layout({"parallel.hp=" + hp, "parallel.cp=" + cp, "parallel.tp=" + std::string(tp),
                        "parallel.partition=" + std::string(partition), "parallel.ring=" + std::string(ring),
                        "parallel.window=2", "parallel.checkpoint=selective"});
          } catch (const ConfigError&) {
            continue;  // not a layout ringmaster takes
          }
          for (const Framework f : {Framework::experiment, Framework::megatron, Framework::te, Framework::internevo,
                                    Framework::yunchang, Framework::mtraining}) {
            const std::string what = std::string(to_string(f)) + " on " + layout_line(e.parallel);
            try {
              const Emission em = emit(f, e, store);
              EXPECT_NO_THROW(check_parallel(em.runs)) << what;
              EXPECT_FALSE(em.text.empty()) << what;
              EXPECT_EQ(em.runs.parallel.world(), e.parallel.world()) << what;  // the same GPUs
              if (em.changes.empty()) {
                EXPECT_EQ(layout_line(em.runs.parallel), layout_line(e.parallel)) << what;
                ++exact;
              } else {
                ++nearest;
              }
              EXPECT_TRUE(f != Framework::experiment || em.changes.empty()) << what;
            } catch (const ConfigError& err) {
              EXPECT_THAT(err.what(), HasSubstr(std::string(to_string(f)) + " cannot run this layout")) << what;
              EXPECT_NE(f, Framework::experiment) << what;
              ++refused;
            }
          }
        }
  EXPECT_GT(exact, 20);
  EXPECT_GT(nearest, 20);
  EXPECT_GT(refused, 0);
}

TEST(Frameworks, NamesRoundTrip) {
  for (const std::string name : {"experiment", "megatron", "te", "internevo", "yunchang", "mtraining"}) {
    const auto f = framework_from_string(name);
    ASSERT_TRUE(f) << name;
    EXPECT_EQ(to_string(*f), name);
    EXPECT_THAT(framework_names(), HasSubstr(name));
  }
  EXPECT_FALSE(framework_from_string("deepspeed"));
}

TEST(Frameworks, ArgumentsSplitLikeAShellScript) {
  const auto words = split_arguments("torchrun pretrain_gpt.py \\\n  --num-layers 32 # the depth\n"
                                     "# a whole comment line --lr 1\n  --tokenizer-model '/a b/c' --x=\"1 2\"\n");
  EXPECT_EQ(words, (std::vector<std::string>{"torchrun", "pretrain_gpt.py", "--num-layers", "32",
                                             "--tokenizer-model", "/a b/c", "--x=1 2"}));
  EXPECT_THROW(split_arguments("--a 'open"), ConfigError);
}

TEST(Frameworks, MegatronArgumentsMapOntoTheLayout) {
  const ConfigStore store;
  const std::string shape =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
      "--ffn-hidden-size 14336 --untie-embeddings-and-output-weights --swiglu --seq-length 65536 ";
  {
    const auto m = import_megatron(shape + "--context-parallel-size 8 --cp-comm-type a2a+p2p "
                                           "--hierarchical-context-parallel-sizes 2 4 --tensor-model-parallel-size 2 "
                                           "--sequence-parallel --recompute-granularity full --use-distributed-optimizer",
                                   32, store);
    EXPECT_EQ(m.model, "llama3-8b");
    EXPECT_EQ(m.parallel.at("hp"), 2);
    EXPECT_EQ(m.parallel.at("cp"), 4);
    EXPECT_EQ(m.parallel.at("tp"), 2);
    EXPECT_EQ(m.parallel.at("dp"), 2);  // 32 GPUs / (tp 2 x CP 8)
    EXPECT_EQ(m.parallel.at("partition"), "zigzag");
    EXPECT_EQ(m.parallel.at("checkpoint"), "full");
    EXPECT_EQ(m.parallel.at("zero_stage"), 1);
    EXPECT_TRUE(m.ignored.empty());
  }
  {
    const auto m = import_megatron(shape + "--context-parallel-size 4 --cp-comm-type a2a --micro-batch-size 2 "
                                           "--global-batch-size 8",
                                   0, store);
    EXPECT_EQ(m.parallel.at("hp"), 4);
    EXPECT_EQ(m.parallel.at("cp"), 1);
    EXPECT_EQ(m.parallel.at("dp"), 4);  // global / micro
    EXPECT_EQ(m.workload.at("batch"), 2);
    EXPECT_EQ(m.parallel.at("checkpoint"), "none");
    EXPECT_EQ(m.parallel.at("zero_stage"), 0);
  }
  {
    // Another shape: inline, with its vocabulary; Megatron's SwiGLU default width.
    const auto m = import_megatron("--num-layers 4 --hidden-size 1536 --num-attention-heads 12 --swiglu "
                                   "--seq-length 4096 --vocab-size 32000 --recompute-granularity full "
                                   "--recompute-method block --recompute-num-layers 2",
                                   0, store);
    ASSERT_TRUE(m.model.is_object());
    EXPECT_EQ(m.model.at("intermediate"), 4096);  // 8 x 1536 / 3 = 4096, a multiple of 64
    EXPECT_EQ(m.model.at("head_dim"), 128);
    EXPECT_EQ(m.model.at("kv_heads"), 12);
    EXPECT_TRUE(m.model.at("tied_embeddings").get<bool>());
    ASSERT_EQ(m.ignored.size(), 1u);
    EXPECT_THAT(m.ignored[0], HasSubstr("--recompute-num-layers"));
  }
  {
    // With the world size given, a global batch beyond one micro-batch per replica is accumulation: said, not read.
    const auto m = import_megatron(shape + "--context-parallel-size 8 --global-batch-size 64", 16, store);
    EXPECT_EQ(m.parallel.at("dp"), 2);
    ASSERT_EQ(m.ignored.size(), 1u);
    EXPECT_THAT(m.ignored[0], HasSubstr("gradient accumulation"));
  }
  EXPECT_THROW(import_megatron(shape + "--seq-length 0", 0, store), ConfigError);
  EXPECT_THROW(import_megatron(shape + "--context-parallel-size 8", 12, store), ConfigError);  // 12 % 8
  EXPECT_THROW(import_megatron("--hidden-size 4096", 0, store), ConfigError);                // no --num-layers
}

}  // namespace
}  // namespace rm::frameworks
