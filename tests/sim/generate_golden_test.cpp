// The generators' output is fixed: on a set of configurations (every scope,
// ring kind, partition, checkpoint policy, ZeRO stage, dp/hp/cp mix, dense,
// static and dynamic patterns) the Schedule file text of today's generator
// hashes to what the generator before issue 9's speed work wrote
// (/work/baseline/ringmaster-pre9 `schedule -o NAME.json --set ...`: FNV-1a 64
// of the file, its op count and its size), updated where a change was meant to
// move them (the index building before the per-call shuffle, issue 11). Any change to an op, a dependency,
// a buffer or a descriptor fails here.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/config/config_store.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "sim/schedule/schedule_file.hpp"

namespace rm::generate {
namespace {

struct Golden {
  const char* name;
  std::vector<std::string> sets;
  uint64_t fnv;
  size_t ops;
  size_t chars;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

const std::vector<Golden>& golden() {
  static const std::vector<Golden> g{
    {"default_small", {"model.layers=2", "workload.seq_len=65536"}, 0x5c21a4c60185b114ull, 33304, 1280727},
    {"selective_zero3", {"model.layers=2", "workload.seq_len=65536", "parallel.checkpoint=selective", "parallel.zero_stage=3"}, 0xefd05f49aee2a67dull, 24284, 1198479},
    {"none_zero2_double", {"model.layers=2", "workload.seq_len=65536", "parallel.checkpoint=none", "parallel.zero_stage=2", "parallel.ring=double_ring"}, 0xc6781c4edf4c943full, 24924, 1170517},
    {"zigzag_2d", {"model.layers=2", "workload.seq_len=65536", "parallel.partition=zigzag", "parallel.ring=ring", "parallel.cp=8", "parallel.hp=4"}, 0x49a1df0cfaa7205cull, 11456, 542336},
    {"contiguous_dp_dense", {"model.layers=2", "workload.seq_len=32768", "parallel.partition=contiguous", "parallel.ring=ring", "parallel.cp=4", "parallel.hp=2", "parallel.dp=4", "workload.pattern=dense-causal", "parallel.zero_stage=0", "kernel.attention=fa2"}, 0xde191406ae29e5bfull, 5120, 262870},
    {"balanced_once", {"model.layers=2", "workload.seq_len=65536", "parallel.partition=balanced", "parallel.cp=16", "parallel.dp=2", "parallel.shuffle=once"}, 0x6056f143294297faull, 18000, 742146},
    {"attn_fwd", {"model.layers=2", "workload.seq_len=65536", "scope=attention_fwd"}, 0x1ee24d26a5a0e205ull, 4606, 396621},
    {"attn_fwd_bwd_zigzag_double", {"model.layers=2", "workload.seq_len=65536", "scope=attention_fwd_bwd", "parallel.partition=zigzag", "parallel.ring=double_ring", "parallel.cp=16", "parallel.dp=2"}, 0xdf76d6ce22977ef1ull, 6140, 534485},
    {"layer_static", {"model.layers=2", "workload.seq_len=65536", "scope=layer", "scope_layer=1", "workload.pattern=qwen2.5-3b-static", "parallel.cp=8", "parallel.hp=2", "parallel.dp=2"}, 0x541e48c878c7b8beull, 5392, 538819},
    {"ulysses_dp", {"model.layers=2", "workload.seq_len=32768", "parallel.cp=1", "parallel.hp=8", "parallel.dp=4"}, 0xb4e5fef06a89d2bfull, 3616, 242184},
    {"pure_dp", {"model.layers=2", "workload.seq_len=16384", "parallel.cp=1", "parallel.hp=1", "parallel.dp=32"}, 0x38a910f9acf4460eull, 3232, 213764},
    {"document_stripe", {"model.layers=2", "workload.seq_len=65536", "workload.pattern=document-causal", "parallel.cp=16", "parallel.dp=2", "parallel.grad_comm_dtype=bf16"}, 0x56c5cd1049262b6eull, 16480, 619259},
    {"context_first_zz", {"model.layers=2", "workload.seq_len=65536", "parallel.placement=context_first", "parallel.partition=zigzag", "parallel.ring=ring", "parallel.ring_order=zigzag_pairs", "parallel.cp=8", "parallel.hp=2", "parallel.dp=2", "parallel.zero_stage=0"}, 0xc34164ebfcf61c93ull, 11360, 529180},
    {"single_gpu", {"model.layers=2", "workload.seq_len=8192", "parallel.cp=1", "parallel.hp=1", "parallel.dp=1"}, 0xa5916b2b763a137cull, 95, 12600},
  };
  return g;
}

class GeneratorGolden : public ::testing::TestWithParam<size_t> {};

TEST_P(GeneratorGolden, ScheduleIdenticalToThePreIssue9Generator) {
  const Golden& g = golden()[GetParam()];
  // The embedded configs, as the CLI that wrote the golden files read them.
  const Experiment e = load_experiment(ConfigStore{}, "", g.sets);
  pipeline::Session session;
  const schedule::Schedule s = session.schedule(e);
  EXPECT_EQ(s.ops.size(), g.ops) << g.name;
  const std::string text = schedule::to_schedule_json(s);
  EXPECT_EQ(text.size(), g.chars) << g.name;
  EXPECT_EQ(fnv1a(text), g.fnv) << g.name;
}

INSTANTIATE_TEST_SUITE_P(Configurations, GeneratorGolden, ::testing::Range(size_t{0}, golden().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return std::string(golden()[i.param].name); });

}  // namespace
}  // namespace rm::generate
