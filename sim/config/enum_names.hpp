// One {value, name} table per enum: to_string, parsing and the "expected one
// of" lists of error messages read the same rows, so each name is spelled once.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rm {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

template <class E, size_t N>
constexpr const char* name_of(const EnumName<E> (&table)[N], E value) {
  for (const auto& row : table)
    if (row.value == value) return row.name;
  return "?";
}

template <class E, size_t N>
constexpr std::optional<E> value_of(const EnumName<E> (&table)[N], std::string_view name) {
  for (const auto& row : table)
    if (name == row.name) return row.value;
  return std::nullopt;
}

template <class E, size_t N>
std::vector<std::string> names_of(const EnumName<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& row : table) out.emplace_back(row.name);
  return out;
}

}  // namespace rm
