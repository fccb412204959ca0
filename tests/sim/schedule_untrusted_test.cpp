// The Schedule reader on untrusted files (issue 13): each case was once a
// crash, an allocation the file did not back, or a value read wrong. Every
// refusal is a ConfigError (ScheduleError) naming the file and the JSON path.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/support/config_error_of.hpp"
#include "sim/pipeline/pipeline.hpp"
#include "tests/support/generate_support.hpp"

namespace rm::schedule {
namespace {

using ::testing::HasSubstr;
using rm::test::config_error_of;

// A small generated Schedule: it has buffers, token sets and attention descriptors.
const Schedule& generated() {
  static const Schedule s = pipeline::Session().schedule(
      generate::testing::small_experiment({"parallel.cp=2", "parallel.partition=zigzag", "scope=attention_fwd"}));
  return s;
}
nlohmann::json good() { return nlohmann::json::parse(to_schedule_json(generated())); }

std::string text_error(const std::string& text) {
  return config_error_of([&] { parse_schedule_text(text, "s.json"); });
}
std::string json_error(const nlohmann::json& j) {
  return config_error_of([&] { parse_schedule_text(j.dump(), "s.json"); });
}

TEST(UntrustedSchedule, TheTextObeysTheJsonLimits) {
  const std::string text = good().dump();
  // Nested 100k deep (once a stack overflow in the experiment's copy).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(text_error(text.substr(0, text.size() - 1) + ",\"zz\":" + deep + "}"),
              HasSubstr("s.json: nested deeper than 256 levels"));
  EXPECT_THAT(text_error(text.substr(0, text.size() - 1) + ",\"op_count\":1}"),
              HasSubstr("s.json: key \"op_count\" appears twice"));
  EXPECT_THAT(text_error(R"({"format": "ringmaster.schedule", "version": 1e999})"),
              HasSubstr("s.json: a number is out of range"));
  EXPECT_THAT(text_error("{\"format\": \"\xff\"}"), HasSubstr("s.json: not valid JSON"));
  EXPECT_THAT(text_error(text.substr(0, text.size() / 2)), HasSubstr("s.json: truncated file"));
  EXPECT_EQ(parse_schedule_text(text, "s.json"), generated());
}

TEST(UntrustedSchedule, AnOpCountTheSegmentsDoNotBackIsRefusedBeforeAllocating) {
  // op_count 3e7 in a 7 KB file once took 3.3 GB before failing; 2^31 - 1 would take hundreds.
  for (int64_t n : {int64_t(30000000), int64_t(std::numeric_limits<int>::max())}) {
    auto j = good();
    const auto had = j["op_count"].get<int64_t>();
    j["op_count"] = n;
    EXPECT_THAT(json_error(j), HasSubstr(fmt::format("$.segments: op {}: missing (no segment covers it", had))) << n;
  }
  // The hook sees the counts before the ops exist, and may refuse.
  auto j = good();
  int64_t seen_ops = -1, seen_ranks = -1;
  (void)from_schedule_json(j, "s.json", [&](int64_t ops, int64_t ranks) { seen_ops = ops, seen_ranks = ranks; });
  EXPECT_EQ(seen_ops, j["op_count"].get<int64_t>());
  EXPECT_EQ(seen_ranks, int64_t(j["ranks"].size()));
  EXPECT_THAT(config_error_of([&] {
                from_schedule_json(j, "s.json", [](int64_t, int64_t) { throw ConfigError("too big for this machine"); });
              }),
              HasSubstr("too big for this machine"));
}

TEST(UntrustedSchedule, CountsAreCheckedAgainstTheArraysBeforeAllocating) {
  auto j = good();
  j["templates"][0]["count"] = std::numeric_limits<int>::max();  // every column a single value would be 2^31 long
  EXPECT_THAT(json_error(j), HasSubstr("$.templates[0].deps: expected an array of 2147483647 arrays"));
  j = good();
  j["buffers"]["count"] = std::numeric_limits<int>::max();
  EXPECT_THAT(json_error(j), HasSubstr("$.buffers.rank: expected 2147483647 values"));
  j = good();
  j["attentions"]["count"] = std::numeric_limits<int>::max();
  EXPECT_THAT(json_error(j), HasSubstr("$.attentions.q_tokens: expected 2147483647 values"));
}

TEST(UntrustedSchedule, SizesThatWouldOverflowAreRefused) {
  auto j = good();
  ASSERT_GE(j["buffers"]["count"].get<int>(), 1);
  j["buffers"]["shape"][0] = {int64_t(1) << 40, int64_t(1) << 40};  // 2^80 elements: once a signed overflow
  EXPECT_THAT(json_error(j), HasSubstr("$.buffers.shape[0]: a buffer of more than 2^50 bytes"));
  j = good();
  ASSERT_GE(j["token_sets"].size(), 1u);
  j["token_sets"][0] = {{0, 1, int64_t(1) << 49, 1 << 20}};  // begin + (count - 1) * stride overflows
  EXPECT_THAT(json_error(j), HasSubstr("$.token_sets[0][0]: the run reaches beyond token 2^50"));
  j = good();
  j["templates"][0]["flops"] = 1e308;  // a step time of 1e293 s
  EXPECT_THAT(json_error(j), HasSubstr("$.templates[0].flops: expected a number in [0, 1e+24], got 1e+308"));
  j = good();
  j["templates"][0]["bytes"] = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(json_error(j), HasSubstr("$.templates[0].bytes: expected an integer in [0, 1125899906842624]"));
}

// An Op holds streams and layers in 16 bits, tags and dependency ids in 32: a
// file's value beyond them is refused by name, never read wrapped.
// Issue 41: a home buffer whose shape holds another element count than its
// attention op's tokens x heads passed the reader and simulate --schedule, and
// ringmaster-run named neither the file nor the buffer's op (with a hint about
// all-to-alls). validate() refuses it, for every reader of the file.
TEST(UntrustedSchedule, AnAttentionBufferOfAnotherElementCountIsRefused) {
  // Without the per-call shuffle Q and LSE are the attention's alone (a shuffled
  // buffer's all-to-all names a wrong size first, by its bytes).
  const nlohmann::json base = nlohmann::json::parse(to_schedule_json(pipeline::Session().schedule(generate::testing::small_experiment(
      {"parallel.cp=2", "parallel.partition=zigzag", "parallel.shuffle=once", "scope=attention_fwd"}))));
  for (const char* role : {"q", "lse"}) {
    const auto& roles = base["buffers"]["role"];
    const size_t b = size_t(std::find(roles.begin(), roles.end(), role) - roles.begin());
    ASSERT_LT(b, roles.size()) << role;
    for (const int64_t scale : {int64_t(1) << 20, int64_t(3)}) {
      auto j = base;
      auto& dims = j["buffers"]["shape"][b];
      dims[1] = dims[1].get<int64_t>() * scale;
      const std::string e = json_error(j);
      EXPECT_THAT(e, HasSubstr("s.json: op ")) << role;
      EXPECT_THAT(e, HasSubstr(fmt::format("buffer {} '{}' has shape [", b, base["buffers"]["name"][b].get<std::string>())))
          << e;
      EXPECT_THAT(e, HasSubstr(fmt::format(", but as its {} it needs batch 1 x ", role))) << e;
    }
  }
}

TEST(UntrustedSchedule, ValuesTheOpCannotHoldAreRefused) {
  auto j = good();
  j["templates"][0]["stream"] = 40000;
  EXPECT_THAT(json_error(j), HasSubstr("$.templates[0].stream: expected an integer in [0, 32766]"));
  j = good();
  j["templates"][0]["tag"] = int64_t(1) << 32;
  EXPECT_THAT(json_error(j), HasSubstr("$.templates[0].tag: expected an integer in [-2147483648, 2147483647]"));
  j = good();
  j["segments"][0]["layer"] = 40000;
  EXPECT_THAT(json_error(j), HasSubstr("$.segments[0].layer: expected an integer in [-1, 32767]"));
  j = good();
  j["segments"][0]["tag"] = -(int64_t(1) << 40);
  EXPECT_THAT(json_error(j), HasSubstr("$.segments[0].tag: expected an integer in [-2147483648, 2147483647]"));
  j = good();
  j["segments"][0]["outside_deps"] = {{0, int64_t(1) << 31}};
  EXPECT_THAT(json_error(j), HasSubstr("$.segments[0].outside_deps[0]: expected an integer in [0, 2147483646]"));
}

}  // namespace
}  // namespace rm::schedule
