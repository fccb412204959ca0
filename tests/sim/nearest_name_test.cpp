// The "did you mean" of unknown keys: edit distance and how near is near enough.
#include "sim/config/nearest_name.hpp"

#include <gtest/gtest.h>

namespace rm {
namespace {

TEST(NearestName, EditDistanceCountsInsertsDeletesAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("cp", "cpp"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("seq_len", ""), 7u);
}

TEST(NearestName, SuggestsTheNearestTypoAndNothingFar) {
  const std::vector<std::string> keys{"dp", "tp", "hp", "cp", "partition", "stripe_tokens", "checkpoint"};
  EXPECT_EQ(nearest_name("partiton", keys), "partition");
  EXPECT_EQ(nearest_name("strip_tokens", keys), "stripe_tokens");
  EXPECT_EQ(nearest_name("checkpoints", keys), "checkpoint");
  EXPECT_EQ(nearest_name("colour", keys), std::nullopt);
  EXPECT_EQ(nearest_name("ring_ordr", keys), std::nullopt);  // near nothing listed here
  EXPECT_EQ(did_you_mean("partiton", keys), " (did you mean \"partition\"?)");
  EXPECT_EQ(did_you_mean("colour", keys), "");
}

}  // namespace
}  // namespace rm
