// Strict reading of JSON configs: every field access names the file and the
// JSON path, so an error says exactly what was wrong and where; finish()
// rejects keys nobody read (typos must not be silently ignored).
#pragma once

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/enum_names.hpp"

namespace rm {

// Every bad-input error of the model carries one line: "<file>: <path>: <what>".
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses "524288", "512k", "512K", "1M", "2m" (binary: k = 1024) or a JSON integer.
int64_t parse_size(const nlohmann::json& v, const std::string& where);
int64_t parse_size_text(std::string_view text, const std::string& where);

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string file, std::string path = "$");

  const std::string& path() const { return path_; }
  const nlohmann::json& raw() const { return *j_; }
  std::string where(std::string_view key) const;  // "file: $.a.key"
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;

  bool has(std::string_view key) const;
  std::string str(std::string_view key) const;
  std::string str_or(std::string_view key, std::string fallback) const;
  std::string one_of(std::string_view key, const std::vector<std::string>& allowed) const;
  std::string one_of_or(std::string_view key, const std::vector<std::string>& allowed,
                        std::string fallback) const;
  // An enum field by a name of its table (enum_names.hpp); `fallback` when absent.
  template <class E, size_t N>
  E enum_of(std::string_view key, const EnumName<E> (&table)[N]) const {
    return *value_of(table, one_of(key, names_of(table)));
  }
  template <class E, size_t N>
  E enum_or(std::string_view key, const EnumName<E> (&table)[N], E fallback) const {
    return *value_of(table, one_of_or(key, names_of(table), name_of(table, fallback)));
  }
  double number(std::string_view key, double min, double max) const;
  double number_or(std::string_view key, double min, double max, double fallback) const;
  int64_t integer(std::string_view key, int64_t min, int64_t max) const;
  int64_t integer_or(std::string_view key, int64_t min, int64_t max, int64_t fallback) const;
  int64_t size(std::string_view key, int64_t min, int64_t max) const;  // accepts k/M suffixes
  bool boolean_or(std::string_view key, bool fallback) const;
  std::vector<int64_t> int_list(std::string_view key, int64_t min, int64_t max) const;

  JsonReader object(std::string_view key) const;            // required object
  std::vector<JsonReader> objects(std::string_view key) const;  // required array of objects
  const nlohmann::json& value(std::string_view key) const;  // required, any type (marks used)

  // Rejects any key that was never asked for.
  void finish() const;

 private:
  const nlohmann::json& need(std::string_view key) const;
  const nlohmann::json* j_;
  std::string file_;
  std::string path_;
  mutable std::set<std::string, std::less<>> used_;
};

// The largest config or index file read (a guard against devices and pipes).
inline constexpr int64_t kMaxConfigBytes = int64_t(256) << 20;

// Reads a whole JSON file (optionally .gz) or throws ConfigError naming it.
// Parsing rejects what traces/json_text.hpp rejects: deep nesting, repeated
// keys, numbers out of range, invalid UTF-8.
nlohmann::json read_json_file(const std::string& path);
nlohmann::json parse_json_text(std::string_view text, const std::string& name);

}  // namespace rm
