// "Did you mean": the known name nearest to a mistyped one by edit distance,
// for errors about unknown keys and names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rm {

// Levenshtein distance (insert, delete, substitute: 1 each).
size_t edit_distance(std::string_view a, std::string_view b);

// The nearest of `known` when it is close enough to be a typo (at most a third
// of the longer name's letters apart, at least 2); nothing otherwise.
std::optional<std::string> nearest_name(std::string_view typed, const std::vector<std::string>& known);

// " (did you mean \"cp\"?)", or "" when nothing is near.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known);

}  // namespace rm
