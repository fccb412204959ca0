// The generators' output is fixed: on a set of configurations (every scope,
// ring kind, partition, checkpoint policy, ZeRO stage, dp/hp/cp mix, dense,
// static and dynamic patterns) the Schedule file text of today's generator
// hashes to what the generator before issue 9's speed work wrote
// (/work/baseline/ringmaster-pre9 `schedule -o NAME.json --set ...`: FNV-1a 64
// of the file, its op count and its size), updated where a change was meant to
// move them (the index building before the per-call shuffle, issue 11; the cluster's
// gpu.arch in the embedded experiment, 16 bytes, issue 40). Any change to an op, a dependency,
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
    {"default_small", {"model.layers=2", "workload.seq_len=65536"}, 0x2496ef3c8b474a6ull, 33304, 1280743},
    {"selective_zero3", {"model.layers=2", "workload.seq_len=65536", "parallel.checkpoint=selective", "parallel.zero_stage=3"}, 0xf77640fef855e99full, 24284, 1198495},
    {"none_zero2_double", {"model.layers=2", "workload.seq_len=65536", "parallel.checkpoint=none", "parallel.zero_stage=2", "parallel.ring=double_ring"}, 0xd225debd4d8cf485ull, 24924, 1170533},
    {"zigzag_2d", {"model.layers=2", "workload.seq_len=65536", "parallel.partition=zigzag", "parallel.ring=ring", "parallel.cp=8", "parallel.hp=4"}, 0x2aee01b24249fc06ull, 11456, 542352},
    {"contiguous_dp_dense", {"model.layers=2", "workload.seq_len=32768", "parallel.partition=contiguous", "parallel.ring=ring", "parallel.cp=4", "parallel.hp=2", "parallel.dp=4", "workload.pattern=dense-causal", "parallel.zero_stage=0", "kernel.attention=fa2"}, 0x8ab4402a69eec2a1ull, 5120, 262886},
    {"balanced_once", {"model.layers=2", "workload.seq_len=65536", "parallel.partition=balanced", "parallel.cp=16", "parallel.dp=2", "parallel.shuffle=once"}, 0x645afb40ff8c04b8ull, 18000, 742162},
    {"attn_fwd", {"model.layers=2", "workload.seq_len=65536", "scope=attention_fwd"}, 0xda8a9015ab98f50full, 4606, 396637},
    {"attn_fwd_bwd_zigzag_double", {"model.layers=2", "workload.seq_len=65536", "scope=attention_fwd_bwd", "parallel.partition=zigzag", "parallel.ring=double_ring", "parallel.cp=16", "parallel.dp=2"}, 0x5547c8501052ec3bull, 6140, 534501},
    {"layer_static", {"model.layers=2", "workload.seq_len=65536", "scope=layer", "scope_layer=1", "workload.pattern=qwen2.5-3b-static", "parallel.cp=8", "parallel.hp=2", "parallel.dp=2"}, 0x55dd2721e0b1fcb0ull, 5392, 538835},
    {"ulysses_dp", {"model.layers=2", "workload.seq_len=32768", "parallel.cp=1", "parallel.hp=8", "parallel.dp=4"}, 0xabb6769059bb1df9ull, 3616, 242200},
    {"pure_dp", {"model.layers=2", "workload.seq_len=16384", "parallel.cp=1", "parallel.hp=1", "parallel.dp=32"}, 0xc8788617b9051bf8ull, 3232, 213780},
    {"document_stripe", {"model.layers=2", "workload.seq_len=65536", "workload.pattern=document-causal", "parallel.cp=16", "parallel.dp=2", "parallel.grad_comm_dtype=bf16"}, 0x6241b2f8e9adae0cull, 16480, 619275},
    {"context_first_zz", {"model.layers=2", "workload.seq_len=65536", "parallel.placement=context_first", "parallel.partition=zigzag", "parallel.ring=ring", "parallel.ring_order=zigzag_pairs", "parallel.cp=8", "parallel.hp=2", "parallel.dp=2", "parallel.zero_stage=0"}, 0xfa2317e191516245ull, 11360, 529196},
    {"single_gpu", {"model.layers=2", "workload.seq_len=8192", "parallel.cp=1", "parallel.hp=1", "parallel.dp=1"}, 0x4c92b08d94176a46ull, 95, 12616},
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
