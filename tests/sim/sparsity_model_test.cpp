// SparsityModel: every shipped pattern builds at several lengths, the top-p
// profile meets its sparsity targets, budgets are dealt exactly, index files
// load, and bad specs fail with "file: $.path: what".
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <fstream>
#include <algorithm>
#include <random>

#include "sim/config/json_reader.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/sparsity/vs_generator.hpp"

namespace rm::sparsity {
namespace {

const std::string kPatterns = std::string(RINGMASTER_SOURCE_DIR) + "/configs/patterns/";

SparsityModel load(const std::string& name, PatternContext ctx) {
  return build_sparsity(read_json_file(kPatterns + name + ".json"), name + ".json", ctx);
}

std::string error_of(const nlohmann::json& spec, PatternContext ctx = {2, 2, 1, 4096, 1, ""}) {
  try {
    build_sparsity(spec, "p.json", ctx);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// Top-p models build a layer on first use: a scope of one layer draws one
// layer's heads; any order of first uses gives the same heads as building
// in order, and the declared sparse()/causal() are what the heads say.
TEST(SparsityModel, TopPLayersBuildOnFirstUseInAnyOrder) {
  std::mt19937_64 rng(99);
  for (int64_t s : {int64_t(4096), int64_t(65536) + 300}) {
    const PatternContext ctx{6, 4, 1, s, 3, ""};
    const auto in_order = load("topp-synthetic", ctx);
    const auto lazy = load("topp-synthetic", ctx);
    EXPECT_EQ(lazy.layers_built(), 0);
    (void)lazy.head(4, 2);
    EXPECT_EQ(lazy.layers_built(), 1);  // one layer, not six
    std::vector<int> order{0, 1, 2, 3, 4, 5};
    std::shuffle(order.begin(), order.end(), rng);
    for (int l : order)
      for (int h = 3; h >= 0; --h) (void)lazy.head(l, h);
    EXPECT_EQ(lazy.layers_built(), 6);
    bool sparse = false, causal = true;
    for (int l = 0; l < 6; ++l)
      for (int h = 0; h < 4; ++h) {
        const HeadPattern& a = in_order.head(l, h);
        ASSERT_TRUE(a == lazy.head(l, h)) << "layer " << l << " head " << h;
        sparse |= a.kind() != PatternKind::dense_causal && a.kind() != PatternKind::dense_full;
        causal &= a.causal();
      }
    EXPECT_EQ(lazy.sparse(), sparse);
    EXPECT_EQ(lazy.causal(), causal);
    EXPECT_EQ(lazy.distinct_heads(), in_order.distinct_heads());
    for (int l = 0; l < 6; ++l) EXPECT_EQ(lazy.block_sparsity(l, {}), in_order.block_sparsity(l, {}));
  }
}

TEST(SparsityModel, EveryShippedPatternBuildsAtShortAndLongLengths) {
  for (const char* name : {"dense-causal", "qwen2.5-3b-static", "topp-synthetic", "sliding-window", "a-shape", "document-causal"}) {
    for (int64_t s : {int64_t(1000), int64_t(8192), int64_t(1) << 20}) {
      if (s > 8192 && std::string(name) != "qwen2.5-3b-static" && std::string(name) != "a-shape") continue;  // keep it fast
      const auto m = load(name, {2, 3, 1, s, 7, ""});
      EXPECT_EQ(m.name(), name);
      EXPECT_EQ(m.layers(), 2);
      EXPECT_EQ(m.heads(), 3);
      for (int h = 0; h < 3; ++h) EXPECT_FALSE(m.head(1, h).allowed(0, 1));  // causal
      const double sp = m.block_sparsity(1, {});
      EXPECT_GE(sp, 0.0) << name << " " << s;
      EXPECT_LT(sp, 1.0) << name << " " << s;
    }
  }
  EXPECT_TRUE(load("topp-synthetic", {1, 1, 1, 4096, 1, ""}).dynamic());
  EXPECT_FALSE(load("dense-causal", {1, 1, 1, 4096, 1, ""}).dynamic());
  EXPECT_EQ(load("dense-causal", {1, 1, 1, 4096, 1, ""}).block_sparsity(0, {}), 0.0);
}

// Equal masks share one object (the id pair costs are cached by), unequal
// ones never do: the exact invariant, on every pair of heads.
TEST(SparsityModel, EqualHeadsShareOneObjectAndOnlyThose) {
  for (const char* name : {"dense-causal", "qwen2.5-3b-static", "topp-synthetic", "a-shape", "document-causal"}) {
    for (int64_t s : {int64_t(512), int64_t(8192)}) {
      const auto m = load(name, {3, 4, 1, s, 3, ""});
      std::set<const HeadPattern*> objects;
      for (int a = 0; a < 12; ++a) {
        objects.insert(&m.head(a / 4, a % 4));
        for (int b = 0; b < 12; ++b) {
          const HeadPattern &x = m.head(a / 4, a % 4), &y = m.head(b / 4, b % 4);
          EXPECT_EQ(&x == &y, x == y) << name << " " << s << " heads " << a << ", " << b;
        }
      }
      EXPECT_EQ(m.distinct_heads(), int(objects.size())) << name << " " << s;
    }
  }
  // Separate but equal objects handed in are merged; a different one is not.
  auto a = std::make_shared<const HeadPattern>(HeadPattern::vertical_slash(IntervalSet({{0, 30}, {500, 501}}), IntervalSet({{0, 100}})));
  auto b = std::make_shared<const HeadPattern>(HeadPattern::vertical_slash(IntervalSet({{0, 30}, {500, 501}}), IntervalSet({{0, 100}})));
  auto c = std::make_shared<const HeadPattern>(HeadPattern::vertical_slash(IntervalSet({{0, 30}, {501, 502}}), IntervalSet({{0, 100}})));
  const SparsityModel m("t", 1, 4, 4096, false, {a, b, c, a});
  EXPECT_EQ(m.distinct_heads(), 2);
  EXPECT_EQ(&m.head(0, 0), &m.head(0, 1));
  EXPECT_EQ(&m.head(0, 0), &m.head(0, 3));
  EXPECT_NE(&m.head(0, 0), &m.head(0, 2));
  EXPECT_EQ(a->hash(), b->hash());
}

TEST(SparsityModel, TopPProfileMeetsItsLayerTargets) {
  const auto m = load("topp-synthetic", {36, 4, 1, 128 * 1024, 1, ""});
  double lo = 1, hi = 0, mean = 0;
  for (int l = 0; l < 36; ++l) {
    const double sp = m.block_sparsity(l, {128, 64});
    lo = std::min(lo, sp), hi = std::max(hi, sp), mean += sp / 36;
  }
  EXPECT_NEAR(lo, 0.87, 0.01);
  EXPECT_NEAR(hi, 0.996, 0.003);
  EXPECT_NEAR(mean, 0.95, 0.01);
  for (int h = 0; h < 4; ++h) {
    EXPECT_LE(m.head(0, h).verticals().size(), 4096);
    EXPECT_LE(m.head(0, h).slash_offsets().size(), 4096);
  }
}

TEST(SparsityModel, ProfileHasTheRequestedMinMaxMean) {
  const auto p = layer_sparsity_profile(36, 0.87, 0.996, 0.95, 3);
  ASSERT_EQ(p.size(), 36u);
  EXPECT_DOUBLE_EQ(*std::min_element(p.begin(), p.end()), 0.87);
  EXPECT_DOUBLE_EQ(*std::max_element(p.begin(), p.end()), 0.996);
  double mean = 0;
  for (double x : p) mean += x / 36;
  EXPECT_NEAR(mean, 0.95, 1e-6);
}

TEST(SparsityModel, StaticBudgetsAreDealtExactlyOverQwenHeads) {
  const auto m = load("qwen2.5-3b-static", {36, 16, 2, 64 * 1024, 1, ""});
  std::map<std::pair<int64_t, int64_t>, int> seen;
  for (int l = 0; l < 36; ++l)
    for (int h = 0; h < 16; ++h) ++seen[{m.head(l, h).verticals().size(), m.head(l, h).slash_offsets().size()}];
  const std::map<std::pair<int64_t, int64_t>, int> want{{{1000, 6096}, 310}, {{3500, 100}, 107}, {{30, 800}, 96},
                                                         {{100, 800}, 44},   {{500, 700}, 17},   {{100, 750}, 2}};
  EXPECT_EQ(seen, want);
}

TEST(SparsityModel, SameSeedSamePatternOtherSeedOther) {
  const auto a = load("topp-synthetic", {2, 2, 1, 16384, 5, ""});
  const auto b = load("topp-synthetic", {2, 2, 1, 16384, 5, ""});
  const auto c = load("topp-synthetic", {2, 2, 1, 16384, 6, ""});
  EXPECT_EQ(a.head(1, 1).verticals(), b.head(1, 1).verticals());
  EXPECT_EQ(a.head(1, 1).slashes(), b.head(1, 1).slashes());
  EXPECT_NE(a.head(1, 1).slashes(), c.head(1, 1).slashes());
}

TEST(SparsityModel, OtherKindsFollowTheirSpecs) {
  const PatternContext ctx{1, 1, 1, 4096, 1, ""};
  const auto bs = build_sparsity({{"kind", "block_sparse"}, {"block_tokens", 64}, {"local_blocks", 2}, {"global_blocks", 1}, {"stride_blocks", 8}},
                                 "inline", ctx);
  EXPECT_TRUE(bs.head(0, 0).allowed(64 * 9 + 5, 64 * 1 + 60));  // block diagonal 8
  EXPECT_TRUE(bs.head(0, 0).allowed(4000, 10));                 // global block column
  EXPECT_FALSE(bs.head(0, 0).allowed(64 * 9 + 5, 64 * 4));
  const auto docs = load("document-causal", {1, 1, 1, 1 << 20, 1, ""});
  const auto& starts = docs.head(0, 0).doc_starts();
  ASSERT_GT(starts.size(), 10u);
  for (size_t i = 1; i < starts.size(); ++i) {
    EXPECT_GE(starts[i] - starts[i - 1], 4096);
    EXPECT_LE(starts[i] - starts[i - 1], 65536);
  }
  EXPECT_FALSE(docs.head(0, 0).allowed(starts[1], starts[1] - 1));
  const auto shared = load("dense-causal", {2, 2, 1, 4096, 1, ""});
  EXPECT_EQ(&shared.head(0, 0), &shared.head(1, 1));  // one object for identical heads: callers cache by address
}

TEST(SparsityModel, IndexFileLoadsAndChecksItsShape) {
  const auto dir = std::filesystem::temp_directory_path() / "rm_sparsity_index_test";
  std::filesystem::create_directories(dir);
  const nlohmann::json file{{"format", "ringmaster.sparsity_indices"}, {"version", 1}, {"layers", 1}, {"heads", 2},
                            {"indices", {{{{"vertical", {5, 7}}, {"slash", {0, 300, 9000}}}, {{"vertical", nlohmann::json::array()}, {"slash", {1}}}}}}};
  std::ofstream(dir / "idx.json") << file.dump();
  const nlohmann::json spec{{"kind", "vertical_slash"}, {"index_file", "idx.json"}, {"sink_tokens", 0}, {"local_diagonals", 0}};
  const auto m = build_sparsity(spec, "p.json", {1, 2, 1, 4096, 1, dir.string()});
  EXPECT_EQ(m.head(0, 0).verticals(), IntervalSet::from_points({5, 7}));
  EXPECT_EQ(m.head(0, 0).slash_offsets(), IntervalSet::from_points({0, 300}));  // 9000 >= seq_len is dropped
  EXPECT_EQ(m.head(0, 1).slash_offsets(), IntervalSet::from_points({1}));
  EXPECT_EQ(m.head(0, 0).slashes(), IntervalSet::from_points({0, 2, 3}));  // block diagonals crossed (128-token blocks)
  const std::string err = [&] {
    try {
      build_sparsity(spec, "p.json", {2, 2, 1, 4096, 1, dir.string()});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  EXPECT_NE(err.find("idx.json"), std::string::npos) << err;
  EXPECT_NE(err.find("1 layers x 2 heads, the model has 2 x 2"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(SparsityModel, BadSpecsNameFileAndPath) {
  EXPECT_EQ(error_of({{"kind", "dense_causal"}, {"colour", 1}}).rfind("p.json: $", 0), 0u);
  EXPECT_NE(error_of({{"kind", "dense_causal"}, {"colour", 1}}).find("colour"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "spiral"}}).find("p.json: $.kind"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "sliding_window"}}).find("$.window_tokens: missing"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "sliding_window"}, {"window_tokens", "4q"}}).find("$.window_tokens"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "vertical_slash"}}).find("exactly one of"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "vertical_slash"}, {"top_p", {{"layer_sparsity", {{"min", 0.9}, {"max", 0.8}, {"mean", 0.85}}}}}}).find("$.top_p.layer_sparsity.max"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "vertical_slash"}, {"budgets", {{{"vertical", 1}, {"slash", 1}}}}}).find("$.budgets[0].heads"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "vertical_slash"}, {"index_file", "nope.json"}}).find("nope.json"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "dense_causal"}}, {0, 1, 1, 10, 1, ""}).find("p.json: $"), std::string::npos);
}

}  // namespace
}  // namespace rm::sparsity
