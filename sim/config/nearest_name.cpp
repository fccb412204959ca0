#include "sim/config/nearest_name.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace rm {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> nearest_name(std::string_view typed, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  size_t best_d = 0;
  for (const auto& k : known) {
    const size_t d = edit_distance(typed, k);
    const size_t limit = std::max<size_t>(2, std::max(typed.size(), k.size()) / 3);
    if (d == 0 || d > limit) continue;
    if (!best || d < best_d) best = k, best_d = d;
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known) {
  const auto n = nearest_name(typed, known);
  return n ? fmt::format(" (did you mean \"{}\"?)", *n) : std::string();
}

}  // namespace rm
