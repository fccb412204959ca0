#include "tests/support/config_error_of.hpp"
#include "sim/schedule/schedule_file.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <functional>

#include <gtest/gtest.h>

#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/validate.hpp"
#include "tests/support/generate_support.hpp"
#include "tests/support/schedule_random.hpp"
#include "traces/text_file.hpp"

namespace rm::schedule {
namespace {

namespace fs = std::filesystem;
using testing::random_schedule;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("rm_schedule_" + std::to_string(::getpid()) + "_" + name);
}

Schedule from_text(const std::string& text) {
  return from_schedule_json(nlohmann::json::parse(text), "mem.json");
}

using rm::test::config_error_of;

TEST(ScheduleFile, RoundTripsRandomSchedules) {
  for (unsigned seed = 0; seed < 60; ++seed) {
    Schedule s = random_schedule(seed);
    ASSERT_FALSE(s.ops.empty());
    EXPECT_EQ(from_text(to_schedule_json(s)), s) << "seed " << seed;
  }
}

TEST(ScheduleFile, FilesRoundTripPlainAndGzipped) {
  for (unsigned seed : {1u, 2u, 3u}) {
    Schedule s = random_schedule(seed);
    for (std::string name : {"s.json", "s.json.gz"}) {
      auto p = temp_path(name);
      write_schedule(s, p.string());
      EXPECT_EQ(read_schedule(p.string()), s) << name << " seed " << seed;
      fs::remove(p);
    }
  }
}

TEST(ScheduleFile, OutputIsDeterministic) {
  Schedule s = random_schedule(11);
  EXPECT_EQ(to_schedule_json(s), to_schedule_json(random_schedule(11)));
  auto a = temp_path("a.json.gz"), b = temp_path("b.json.gz");
  write_schedule(s, a.string());
  write_schedule(s, b.string());
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  std::string ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_FALSE(ba.empty());
  EXPECT_EQ(ba, bb);
  fs::remove(a);
  fs::remove(b);
}

// The hash a measured Timeline names its Schedule by: equal Schedules (also after a
// file round trip) hash alike, and changing one op's bytes changes it.
TEST(ScheduleFile, HashIdentifiesTheSchedule) {
  std::set<std::string> hashes;
  for (unsigned seed = 0; seed < 20; ++seed) {
    Schedule s = random_schedule(seed);
    const std::string h = schedule_hash(s);
    EXPECT_EQ(h.size(), 16u);
    EXPECT_EQ(h, schedule_hash(from_text(to_schedule_json(s))));
    hashes.insert(h);
    for (auto& op : s.ops)
      if (s.desc(op).bytes > 0) {
        rm::testing::edit_desc(s, op).bytes += 1;
        EXPECT_NE(schedule_hash(s), h) << "seed " << seed;
        break;
      }
  }
  EXPECT_EQ(hashes.size(), 20u);
}

TEST(ScheduleFile, RepeatedLayersShareOneTemplate) {
  ScheduleBuilder b;
  for (int r = 0; r < 2; ++r) b.add_rank(r), b.add_stream(r, StreamKind::compute), b.add_stream(r, StreamKind::comm_intra);
  OpId prev = -1;
  for (int layer = 0; layer < 10; ++layer) {
    Where w{Phase::forward, layer, 0};
    OpId c = b.compute(0, 0, OpKind::attn_fwd, w, {1e9 * (layer + 1), 10 * layer, 128},
                       prev >= 0 ? std::vector<OpId>{prev} : std::vector<OpId>{});
    auto x = b.p2p({0, 1, 1, 1, 4096, w});
    b.add_dep(x.send, c);
    prev = b.compute(0, 0, OpKind::elementwise, w, {1e6, 0, 128}, {c});
  }
  Schedule s = std::move(b).build();
  auto j = nlohmann::json::parse(to_schedule_json(s));
  EXPECT_EQ(j["templates"].size(), 2u);  // layer 0 has no outside dep, the rest share one structure
  EXPECT_EQ(j["segments"].size(), 10u);
  EXPECT_TRUE(j["segments"][5].contains("flops"));   // costs differ per layer...
  EXPECT_FALSE(j["segments"][5].contains("bytes"));  // ...bytes do not
  EXPECT_EQ(j["segments"][5]["outside_deps"], nlohmann::json::parse("[[0, 19]]"));
  EXPECT_EQ(from_schedule_json(j, "mem"), s);
}

TEST(ScheduleFile, RefusesUnknownFormatAndVersion) {
  auto j = nlohmann::json::parse(to_schedule_json(random_schedule(1)));
  j["version"] = 3;
  EXPECT_NE(config_error_of([&] { from_schedule_json(j, "s.json"); }).find("s.json: $.version: unsupported schedule version 3"),
            std::string::npos);
  j["version"] = 1;
  EXPECT_NE(config_error_of([&] { from_schedule_json(j, "s.json"); })
                .find("s.json: $.version: version 1 is no longer read (it has no buffers): re-export it with "
                      "`ringmaster schedule`"),
            std::string::npos);
  j["version"] = 2;
  j["format"] = "chakra";
  EXPECT_NE(config_error_of([&] { from_schedule_json(j, "s.json"); }).find("unknown format \"chakra\""), std::string::npos);
  j["format"] = "ringmaster.schedule";
  j["surprise"] = 1;
  EXPECT_NE(config_error_of([&] { from_schedule_json(j, "s.json"); }).find("$.surprise: unknown key"), std::string::npos);
}

// Executable schedules (buffers, token sets, accesses, attention and GEMM
// descriptors) of every kind of generator come back identical.
TEST(ScheduleFile, RoundTripsGeneratedSchedules) {
  using generate::testing::small_experiment;
  for (std::vector<std::string> o : std::vector<std::vector<std::string>>{
           {"scope=step", "parallel.dp=2", "parallel.zero_stage=1"},
           {"scope=layer", "parallel.cp=4", "parallel.partition=stripe", "parallel.stripe_tokens=64"},
           {"scope=layer", "parallel.hp=2", "parallel.cp=4", "parallel.ring=double_ring", "parallel.window=2",
            "parallel.checkpoint=selective"}}) {
    o.push_back("workload.seq_len=1024");
    auto e = small_experiment(o);
    auto g = generate::testing::generate(
        e, generate::testing::model_of(e, generate::testing::vertical_slash_pattern(), true));
    ASSERT_FALSE(g.s.buffers.empty());
    ASSERT_FALSE(g.s.attentions.empty());
    ASSERT_FALSE(g.s.gemms.empty());
    const std::string text = to_schedule_json(g.s);
    if (o[0] == "scope=step") {
      EXPECT_NE(text.find("\"access_at\""), std::string::npos);  // x{l} differs per layer
    }
    Schedule back = from_text(text);
    EXPECT_EQ(back, g.s) << o[1];
    EXPECT_TRUE(check(back).empty());
  }
}

TEST(ScheduleFile, ReportsBadDescriptorsWithTheirPath) {
  auto e = generate::testing::small_experiment({"scope=attention_fwd", "parallel.cp=2", "workload.seq_len=1024"});
  auto g = generate::testing::generate(e, generate::testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  auto j = nlohmann::json::parse(to_schedule_json(g.s));
  auto bad = j;
  bad["buffers"]["dtype"][0] = "fp8";
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.buffers.dtype[0]: unknown dtype \"fp8\""),
            std::string::npos);
  bad = j;
  bad["attentions"]["mask"] = "causal";  // a table column must be an array
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.attentions.mask: expected an array"),
            std::string::npos);
  bad = j;
  bad["token_sets"][0][0] = {0, 0, 0, 1};  // len 0
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.token_sets[0][0][1]: expected an integer in [1"),
            std::string::npos);
  bad = j;
  bad["accesses"][0] = {{0}};
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.accesses[0]: expected [reads, writes]"),
            std::string::npos);
}

TEST(ScheduleFile, RefusesTruncatedFiles) {
  std::string text = to_schedule_json(random_schedule(4));
  for (std::string name : {"t.json", "t.json.gz"}) {
    auto p = temp_path(name);
    traces::write_text_file_atomic(p.string(), text);
    fs::resize_file(p, fs::file_size(p) * 2 / 3);
    std::string msg = config_error_of([&] { read_schedule(p.string()); });
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    fs::remove(p);
  }
}

TEST(ScheduleFile, RefusesDuplicateAndMissingIds) {
  auto j = nlohmann::json::parse(to_schedule_json(random_schedule(5)));
  ASSERT_GE(j["segments"].size(), 2u);
  auto dup = j;
  dup["segments"][1]["first"] = 0;  // overlaps segment 0
  EXPECT_NE(config_error_of([&] { from_schedule_json(dup, "s.json"); }).find("op 0: duplicate id"), std::string::npos);
  auto missing = j;
  missing["op_count"] = j["op_count"].get<int>() + 1;
  EXPECT_NE(config_error_of([&] { from_schedule_json(missing, "s.json"); })
                .find("op " + std::to_string(j["op_count"].get<int>()) + ": missing"),
            std::string::npos);
}

TEST(ScheduleFile, DanglingDependencyInFileNamesTheOp) {
  ScheduleBuilder b;
  b.add_rank(0), b.add_stream(0, StreamKind::compute);
  OpId a = b.compute(0, 0, OpKind::gemm, {Phase::forward, 0, -1}, {1e9, 0, 0});
  b.compute(0, 0, OpKind::gemm, {Phase::forward, 1, -1}, {1e9, 0, 0}, {a});
  auto j = nlohmann::json::parse(to_schedule_json(std::move(b).build()));
  j["segments"][1]["outside_deps"][0][1] = 99;
  auto p = temp_path("dangling.json");
  traces::write_text_file_atomic(p.string(), j.dump());
  std::string msg = config_error_of([&] { read_schedule(p.string()); });
  EXPECT_NE(msg.find("op 1 (rank 0 stream 'compute', gemm forward layer 1): depends on op 99, which does not exist"),
            std::string::npos)
      << msg;
  fs::remove(p);
}

TEST(ScheduleFile, ReportsBadColumnWithItsPath) {
  auto j = nlohmann::json::parse(to_schedule_json(random_schedule(6)));
  j["templates"][0]["kind"] = "teleport";
  EXPECT_NE(config_error_of([&] { from_schedule_json(j, "s.json"); }).find("$.templates[0].kind: unknown op kind"),
            std::string::npos);
}

// The reader names a bad value's JSON path only on error (it is formatted
// lazily): the path must still be the element's, in every column and in deps.
TEST(ScheduleFile, ReportsBadElementWithItsPath) {
  auto j = nlohmann::json::parse(to_schedule_json(random_schedule(6)));
  auto& t = j["templates"][0];
  ASSERT_TRUE(t["deps"].is_array() && t["deps"].size() >= 3u);
  auto bad = j;
  bad["templates"][0]["rank"] = nlohmann::json::array();
  for (size_t i = 0; i < t["deps"].size(); ++i) bad["templates"][0]["rank"].push_back(i == 2 ? -5 : 0);
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.templates[0].rank[2]: expected an integer in [0, "),
            std::string::npos);
  bad = j;
  bad["templates"][0]["deps"][2] = {7777777};
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.templates[0].deps[2][0]: expected an integer in [-1, "),
            std::string::npos);
  bad = j;
  bad["templates"][0]["deps"][1] = 3;
  EXPECT_NE(config_error_of([&] { from_schedule_json(bad, "s.json"); }).find("$.templates[0].deps[1]: expected an array of local op indices"),
            std::string::npos);
}

// A file read and written again is the same text, byte for byte.
TEST(ScheduleFile, TextRoundTripsByteForByte) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const std::string text = to_schedule_json(random_schedule(seed));
    EXPECT_EQ(to_schedule_json(from_text(text)), text) << "seed " << seed;
  }
  auto e = generate::testing::small_experiment({"parallel.cp=2", "workload.seq_len=1024"});
  auto g = generate::testing::generate(e, generate::testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  const std::string text = to_schedule_json(g.s);
  EXPECT_EQ(to_schedule_json(from_text(text)), text);
}

}  // namespace
}  // namespace rm::schedule

namespace rm::schedule {
namespace {

// The example in docs/schedule-format.md must stay a valid file.
TEST(ScheduleFile, DocumentedExampleIsValid) {
  std::ifstream in(std::string(RINGMASTER_SOURCE_DIR) + "/docs/schedule-format.md");
  std::string doc((std::istreambuf_iterator<char>(in)), {});
  auto begin = doc.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  auto end = doc.find("```", begin);
  Schedule s = from_schedule_json(nlohmann::json::parse(doc.substr(begin, end - begin)), "schedule-format.md");
  EXPECT_NO_THROW(validate(s));
  ASSERT_EQ(s.ops.size(), 5u);
  EXPECT_EQ(s.ops[2].kind, OpKind::recv);
  EXPECT_EQ(s.ops[4].deps, (std::vector<OpId>{2}));
  ASSERT_NE(s.attention_of(s.ops[0]), nullptr);  // it is executable: every op names its buffers
  for (const Op& op : s.ops) EXPECT_NE(s.access_of(op), nullptr) << op.id;
}

}  // namespace
}  // namespace rm::schedule
