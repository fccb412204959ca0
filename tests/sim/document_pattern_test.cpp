// Dense-family pattern specs: the shipped dense-full and document patterns
// build; document lengths follow their distribution (list cycled, uniform
// and histogram ranges, fractions under their cap), fill the sequence
// exactly, and are seeded by workload.seed; full attention is not sparse and
// not causal; bad fields name themselves.
#include <algorithm>
#include <tuple>

#include <gtest/gtest.h>

#include "sim/config/json_reader.hpp"
#include "sim/sparsity/document_lengths.hpp"
#include "sim/sparsity/sparsity_model.hpp"

namespace rm::sparsity {
namespace {

const std::string kPatterns = std::string(RINGMASTER_SOURCE_DIR) + "/configs/patterns/";

std::vector<int64_t> starts_of(const nlohmann::json& docs, int64_t s, uint64_t seed = 1) {
  return document_starts(JsonReader(docs, "p.json", "$.documents"), s, seed);
}

std::vector<int64_t> lengths(const std::vector<int64_t>& starts, int64_t s) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < starts.size(); ++i) out.push_back((i + 1 < starts.size() ? starts[i + 1] : s) - starts[i]);
  return out;
}

TEST(DocumentPatterns, ShippedDenseFamilyPatternsBuild) {
  for (const char* name : {"dense-full", "document-causal", "document-full", "document-causal-capped", "document-causal-histogram"}) {
    const auto m = build_sparsity(read_json_file(kPatterns + name + ".json"), name, {2, 4, 2, 1 << 20, 1, ""});
    EXPECT_TRUE(m.head(1, 3).dense_family()) << name;
    EXPECT_EQ(m.causal(), std::string(name).find("full") == std::string::npos) << name;
    EXPECT_NEAR(m.block_sparsity(0, {}), 0.0, std::string(name) == "dense-full" ? 1e-12 : 1.0) << name;
  }
  const auto full = build_sparsity(read_json_file(kPatterns + "dense-full.json"), "dense-full", {1, 1, 1, 4096, 1, ""});
  EXPECT_FALSE(full.sparse());  // a dense kernel, no index
  EXPECT_EQ(full.head(0, 0).kind(), PatternKind::dense_full);
}

TEST(DocumentPatterns, ListIsCycledAndTheLastDocumentEndsAtTheSequence) {
  const auto st = starts_of({{"distribution", "list"}, {"lengths", {"1k", 3000, 24}}}, 10000);
  EXPECT_EQ(st, (std::vector<int64_t>{0, 1024, 4024, 4048, 5072, 8072, 8096, 9120}));
}

TEST(DocumentPatterns, RandomLengthsStayInTheirRangesAndFollowTheSeed) {
  const int64_t s = 1 << 20;
  const nlohmann::json uniform{{"distribution", "uniform"}, {"min_tokens", "4k"}, {"max_tokens", "8k"}};
  const nlohmann::json hist{{"distribution", "histogram"},
                            {"bins", {{{"min_tokens", 100}, {"max_tokens", 200}, {"weight", 3}},
                                      {{"min_tokens", 5000}, {"max_tokens", 5000}, {"weight", 1}}}}};
  const nlohmann::json frac{{"distribution", "fractions"}, {"min_fraction", 0.01}, {"max_fraction", 0.25}};
  for (const auto& [spec, lo, hi] : {std::tuple{uniform, int64_t(4096), int64_t(8192)}, std::tuple{hist, int64_t(100), int64_t(5000)},
                                     std::tuple{frac, int64_t(10486), s / 4}}) {
    const auto st = starts_of(spec, s);
    const auto len = lengths(st, s);
    ASSERT_GT(len.size(), 3u);
    for (size_t i = 0; i + 1 < len.size(); ++i) {  // the last one is cut at seq_len
      EXPECT_GE(len[i], lo) << spec.dump();
      EXPECT_LE(len[i], hi) << spec.dump();
    }
    EXPECT_LE(len.back(), hi);
    EXPECT_EQ(starts_of(spec, s), st);
    EXPECT_NE(starts_of(spec, s, 2), st) << spec.dump();
  }
  // Histogram: both bins are drawn, the heavier one more often (weights 3 : 1).
  const auto len = lengths(starts_of(hist, s), s);
  const auto longs = std::count(len.begin(), len.end() - 1, 5000);
  EXPECT_GT(longs, 0);
  EXPECT_GT(int64_t(len.size()) - 1 - longs, 2 * longs);
}

TEST(DocumentPatterns, ShippedDocumentCausalIsUniformFrom4kTo64k) {
  const auto m = build_sparsity(read_json_file(kPatterns + "document-causal.json"), "d", {1, 1, 1, 1 << 20, 1, ""});
  const auto& st = m.head(0, 0).doc_starts();
  ASSERT_GT(st.size(), 16u);
  EXPECT_EQ(st[0], 0);
  for (size_t i = 1; i < st.size(); ++i) {
    EXPECT_GE(st[i] - st[i - 1], 4096);
    EXPECT_LE(st[i] - st[i - 1], 65536);
  }
}

TEST(DocumentPatterns, BadFieldsNameTheField) {
  auto error = [](const nlohmann::json& spec) {
    try {
      build_sparsity(spec, "p.json", {1, 1, 1, 4096, 1, ""});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({{"kind", "document_full"}}).find("p.json: $.documents: missing required field"), std::string::npos);
  EXPECT_NE(error({{"kind", "document_causal"}, {"documents", {{"distribution", "uniform"}, {"min_tokens", 10}}}})
                .find("$.documents.max_tokens"),
            std::string::npos);
  EXPECT_NE(error({{"kind", "document_causal"}, {"documents", {{"distribution", "fractions"}, {"max_fraction", 0.0001}}}})
                .find("$.documents.max_fraction: 0.0001 of 4096 tokens"),
            std::string::npos);
  EXPECT_NE(error({{"kind", "dense_full"}, {"documents", {{"distribution", "list"}}}}).find("$.documents: unknown key"),
            std::string::npos);
  EXPECT_NE(error({{"kind", "dense_fulll"}}).find("$.kind: expected one of"), std::string::npos);
}

}  // namespace
}  // namespace rm::sparsity
