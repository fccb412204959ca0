// The one-pass Schedule reader (schedule_sax.hpp) against the DOM reader
// (from_schedule_json over traces::parse_json_checked), the definition: on
// what the writer writes it must take the text and give the same Schedule;
// on any other text, whatever it takes the DOM reader must take and read the
// same, and whatever the DOM reader refuses it must not take (so the fault is
// named by the DOM reader, as before).
#include "sim/schedule/schedule_sax.hpp"

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/schedule_file.hpp"
#include "tests/support/generate_support.hpp"
#include "tests/support/schedule_random.hpp"
#include "traces/json_text.hpp"

namespace rm::schedule {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// The DOM reader's answer: the Schedule, or nullopt when it refuses the text.
std::optional<Schedule> dom_read(std::string_view text) {
  try {
    return from_schedule_json(traces::parse_json_checked(text, "t.json"), "t.json");
  } catch (const ConfigError&) {
    return std::nullopt;
  } catch (const traces::JsonTextError&) {
    return std::nullopt;
  }
}

// The oracle on any text: what the one-pass reader takes, the DOM reader
// reads the same. Returns whether the one-pass reader took it.
bool agrees_with_dom(std::string_view text, const std::string& what) {
  const std::optional<Schedule> one = read_schedule_one_pass(text);
  const std::optional<Schedule> dom = dom_read(text);
  if (one) {
    EXPECT_TRUE(dom.has_value()) << what << ": the one-pass reader took a text the DOM reader refuses";
    if (dom) {
      EXPECT_TRUE(*one == *dom) << what << ": the two readers read different Schedules";
    }
  }
  return one.has_value();
}

// Written files: taken, and the same Schedule as the DOM reader's and the original.
void expect_taken(const Schedule& s, const std::string& what) {
  const std::string text = to_schedule_json(s);
  const std::optional<Schedule> one = read_schedule_one_pass(text);
  ASSERT_TRUE(one.has_value()) << what;
  EXPECT_TRUE(*one == s) << what;
  const std::optional<Schedule> dom = dom_read(text);
  ASSERT_TRUE(dom.has_value()) << what;
  EXPECT_TRUE(*one == *dom) << what;
}

TEST(ScheduleOnePass, ReadsRandomSchedulesAsTheDomReaderDoes) {
  for (unsigned seed = 0; seed < 150; ++seed) expect_taken(testing::random_schedule(seed), "seed " + std::to_string(seed));
}

// Executable Schedules: buffers, token sets, accesses, attention and GEMM
// descriptors, `access_at`, every scope, partition, ring kind and checkpoint policy.
TEST(ScheduleOnePass, ReadsGeneratedSchedulesOfEveryKind) {
  using generate::testing::small_experiment;
  const std::vector<std::vector<std::string>> cases{
      {"scope=attention_fwd", "parallel.cp=2", "parallel.partition=zigzag"},
      {"scope=attention_fwd_bwd", "parallel.cp=4", "parallel.partition=contiguous"},
      {"scope=layer", "parallel.cp=4", "parallel.partition=stripe", "parallel.stripe_tokens=64"},
      {"scope=layer", "parallel.hp=2", "parallel.cp=4", "parallel.ring=double_ring", "parallel.window=2",
       "parallel.checkpoint=selective"},
      {"scope=step", "parallel.dp=2", "parallel.zero_stage=1"},
      {"scope=step", "parallel.cp=2", "parallel.dp=2", "parallel.zero_stage=3", "parallel.checkpoint=full"},
  };
  for (std::vector<std::string> o : cases) {
    o.push_back("workload.seq_len=1024");
    const auto e = generate::testing::small_experiment(o);
    for (const bool dynamic : {false, true}) {
      const auto g = generate::testing::generate(
          e, generate::testing::model_of(e, generate::testing::vertical_slash_pattern(), dynamic));
      expect_taken(g.s, fmt::format("{} {}", fmt::join(o, " "), dynamic));
    }
  }
}

TEST(ScheduleOnePass, TakesAnyWhitespaceAndLeavesOtherKeyOrdersToTheDom) {
  const Schedule s = testing::random_schedule(3);
  const ojson j = ojson::parse(to_schedule_json(s));
  for (const int indent : {1, 2, 4}) {
    const std::optional<Schedule> one = read_schedule_one_pass(j.dump(indent) + "\r\n\t ");
    ASSERT_TRUE(one.has_value());
    EXPECT_TRUE(*one == s);
  }
  // Keys sorted: a template's `count` comes after its columns, which this reader does not take.
  const std::string sorted = nlohmann::json::parse(to_schedule_json(s)).dump();
  EXPECT_FALSE(read_schedule_one_pass(sorted).has_value());
  EXPECT_TRUE(parse_schedule_text(sorted, "sorted.json") == s);  // read by the DOM reader instead
}

TEST(ScheduleOnePass, CallsTheAllocationCheckWithTheOpAndRankCounts) {
  const Schedule s = testing::random_schedule(5);
  int64_t ops = -1, ranks = -1;
  ASSERT_TRUE(read_schedule_one_pass(to_schedule_json(s), [&](int64_t o, int64_t r) { ops = o, ranks = r; }));
  EXPECT_EQ(ops, static_cast<int64_t>(s.ops.size()));
  EXPECT_EQ(ranks, static_cast<int64_t>(s.ranks.size()));
  EXPECT_THROW(read_schedule_one_pass(to_schedule_json(s), [](int64_t, int64_t) { throw ScheduleError("no room"); }),
               ScheduleError);
}

// Byte-level damage: a byte replaced, dropped or added anywhere in the text.
TEST(ScheduleOnePass, DamagedTextsAreReadAsTheDomReaderReadsThem) {
  auto e = generate::testing::small_experiment({"scope=attention_fwd", "parallel.cp=2", "workload.seq_len=1024"});
  const auto g = generate::testing::generate(e, generate::testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  const std::string good = to_schedule_json(g.s);
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789-+.eE,:[]{}\" \\nax\x01\xff";
  int taken = 0;
  for (int k = 0; k < 600; ++k) {
    std::string t = good;
    const size_t at = rng() % t.size();
    const char c = alphabet[rng() % alphabet.size()];
    switch (rng() % 3) {
      case 0: t[at] = c; break;
      case 1: t.erase(at, 1); break;
      default: t.insert(at, 1, c); break;
    }
    taken += agrees_with_dom(t, fmt::format("damage {} at byte {}", k, at));
  }
  EXPECT_GT(taken, 30);  // digits changed in place still read: the oracle is not empty
}

// Every place a value can stand in the file (each JSON path with array
// indices collapsed: $.templates[#].deps[#][#]), once: the first instance.
void value_places(const ojson& v, const ojson::json_pointer& at, std::string pattern, std::set<std::string>& seen,
                  std::vector<ojson::json_pointer>& out) {
  if (!seen.insert(pattern).second) return;
  out.push_back(at);
  if (pattern == "$.experiment") return;  // free JSON: its inside is the checked parser's
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it) value_places(it.value(), at / it.key(), pattern + "." + it.key(), seen, out);
  else if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) value_places(v[i], at / i, pattern + "[#]", seen, out);
}

// Value-level damage: each place in turn holds each value from the edges of
// the checks (ranges, types, sizes, enum names), or is dropped.
TEST(ScheduleOnePass, DamagedValuesAreReadAsTheDomReaderReadsThem) {
  const std::vector<ojson> values{-1, 0, 1, 2, 2147483648LL, (int64_t(1) << 50) + 1, -9223372036854775807LL - 1,
                                  18446744073709551615ULL, 1.5, 2e24, "x", "send", nullptr, ojson::array(),
                                  ojson::array({0}), ojson::array({ojson::array({0, 1})}), ojson::object()};
  auto e = generate::testing::small_experiment({"scope=attention_fwd", "parallel.cp=2", "workload.seq_len=1024"});
  const auto g = generate::testing::generate(e, generate::testing::model_of(e, sparsity::HeadPattern::dense_causal()));
  ASSERT_FALSE(g.s.buffers.empty() || g.s.token_sets.empty() || g.s.accesses.empty() || g.s.attentions.empty());
  const Schedule random = testing::random_schedule(2);
  int taken = 0, cases = 0;
  for (const Schedule* s : {&g.s, &random}) {
    const ojson good = ojson::parse(to_schedule_json(*s));
    std::set<std::string> seen;
    std::vector<ojson::json_pointer> places;
    value_places(good, ojson::json_pointer(), "$", seen, places);
    for (const auto& at : places) {
      if (at.empty()) continue;
      for (size_t k = 0; k <= values.size(); ++k, ++cases) {
        ojson j = good;
        if (k == values.size()) {  // dropped
          ojson& parent = j[at.parent_pointer()];
          if (parent.is_object()) parent.erase(at.back());
          else parent.erase(static_cast<size_t>(std::stoul(at.back())));
        } else {
          j[at] = values[k];
        }
        taken += agrees_with_dom(j.dump(), fmt::format("{} = {}", at.to_string(), k == values.size() ? "(dropped)" : values[k].dump()));
      }
    }
  }
  EXPECT_GT(taken, cases / 20);  // many replacements are valid: the oracle is not empty
}

// The fuzz harness's regression corpus: each once crashed a reader or was read wrong.
TEST(ScheduleOnePass, TheFuzzCorpusIsReadAsTheDomReaderReadsIt) {
  const fs::path dir = fs::path(RINGMASTER_SOURCE_DIR) / "tests/fuzz/corpus/schedule";
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    std::ifstream in(f.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    agrees_with_dom(ss.str(), f.path().filename().string());
    ++files;
  }
  EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace rm::schedule
