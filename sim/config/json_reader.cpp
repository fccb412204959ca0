#include "sim/config/json_reader.hpp"

#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sim/config/nearest_name.hpp"
#include "traces/json_text.hpp"
#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"

namespace rm {

namespace {
std::string type_name(const nlohmann::json& v) { return v.type_name(); }

std::string shown(const nlohmann::json& v) {
  // Shown in an error message: bytes that are not UTF-8 are replaced, never thrown on.
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}
}  // namespace

int64_t parse_size_text(std::string_view text, const std::string& where) {
  std::string t(text);
  if (t.empty()) throw ConfigError(fmt::format("{}: expected a size like 524288, 512k or 1M, got \"\"", where));
  int64_t mult = 1;
  char last = t.back();
  if (last == 'k' || last == 'K') mult = 1024;
  else if (last == 'm' || last == 'M') mult = 1024 * 1024;
  else if (last == 'g' || last == 'G') mult = int64_t(1024) * 1024 * 1024;
  if (mult != 1) t.pop_back();
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw ConfigError(fmt::format("{}: expected a size like 524288, 512k or 1M, got \"{}\"", where, text));
  if (t.size() > 15) throw ConfigError(fmt::format("{}: size \"{}\" is too large", where, text));
  const int64_t n = std::stoll(t);
  if (n > std::numeric_limits<int64_t>::max() / mult)
    throw ConfigError(fmt::format("{}: size \"{}\" is too large", where, text));
  return n * mult;
}

int64_t parse_size(const nlohmann::json& v, const std::string& where) {
  // Above int64 (9223372036854775808 and up): named as typed, never wrapped negative.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw ConfigError(fmt::format("{}: size {} is out of range", where, shown(v)));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  if (v.is_string()) return parse_size_text(v.get<std::string>(), where);
  throw ConfigError(fmt::format("{}: expected a size like 524288, \"512k\" or \"1M\", got {}", where, shown(v)));
}

JsonReader::JsonReader(const nlohmann::json& j, std::string file, std::string path)
    : j_(&j), file_(std::move(file)), path_(std::move(path)) {
  if (!j.is_object())
    throw ConfigError(fmt::format("{}: {}: expected an object, got {}", file_, path_, type_name(j)));
}

std::string JsonReader::where(std::string_view key) const {
  return fmt::format("{}: {}.{}", file_, path_, key);
}

void JsonReader::fail(std::string_view key, std::string_view what) const {
  throw ConfigError(fmt::format("{}: {}", where(key), what));
}

bool JsonReader::has(std::string_view key) const {
  auto it = j_->find(std::string(key));
  if (it == j_->end()) return false;
  used_.insert(std::string(key));
  return true;
}

const nlohmann::json& JsonReader::need(std::string_view key) const {
  auto it = j_->find(std::string(key));
  if (it == j_->end()) fail(key, "missing required field");
  used_.insert(std::string(key));
  return *it;
}

const nlohmann::json& JsonReader::value(std::string_view key) const { return need(key); }

std::string JsonReader::str(std::string_view key) const {
  const auto& v = need(key);
  if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", shown(v)));
  return v.get<std::string>();
}

std::string JsonReader::str_or(std::string_view key, std::string fallback) const {
  return has(key) ? str(key) : fallback;
}

std::string JsonReader::one_of(std::string_view key, const std::vector<std::string>& allowed) const {
  std::string s = str(key);
  for (const auto& a : allowed)
    if (a == s) return s;
  fail(key, fmt::format("expected one of {}, got \"{}\"", fmt::join(allowed, ", "), s));
}

std::string JsonReader::one_of_or(std::string_view key, const std::vector<std::string>& allowed,
                                  std::string fallback) const {
  return has(key) ? one_of(key, allowed) : fallback;
}

double JsonReader::number(std::string_view key, double min, double max) const {
  const auto& v = need(key);
  if (!v.is_number()) fail(key, fmt::format("expected a number, got {}", shown(v)));
  double d = v.get<double>();
  if (!(d >= min && d <= max)) fail(key, fmt::format("expected a number in [{}, {}], got {}", min, max, d));
  return d;
}

double JsonReader::number_or(std::string_view key, double min, double max, double fallback) const {
  return has(key) ? number(key, min, max) : fallback;
}

int64_t JsonReader::integer(std::string_view key, int64_t min, int64_t max) const {
  const auto& v = need(key);
  if (!v.is_number_integer()) fail(key, fmt::format("expected an integer, got {}", shown(v)));
  // A value above int64 is out of range as typed (get<int64_t> would wrap it negative).
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max))
    fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, shown(v)));
  int64_t i = v.get<int64_t>();
  if (i < min || i > max) fail(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, i));
  return i;
}

int64_t JsonReader::integer_or(std::string_view key, int64_t min, int64_t max, int64_t fallback) const {
  return has(key) ? integer(key, min, max) : fallback;
}

int64_t JsonReader::size(std::string_view key, int64_t min, int64_t max) const {
  const nlohmann::json& v = need(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max))  // as typed, even above int64
    fail(key, fmt::format("expected a size in [{}, {}], got {}", min, max, shown(v)));
  int64_t i = parse_size(v, where(key));
  if (i < min || i > max) fail(key, fmt::format("expected a size in [{}, {}], got {}", min, max, i));
  return i;
}

bool JsonReader::boolean_or(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = need(key);
  if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {}", shown(v)));
  return v.get<bool>();
}

std::vector<int64_t> JsonReader::int_list(std::string_view key, int64_t min, int64_t max) const {
  const auto& v = need(key);
  if (!v.is_array()) fail(key, fmt::format("expected an array of integers, got {}", shown(v)));
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& e = v[i];
    std::string k = fmt::format("{}[{}]", key, i);
    if (!e.is_number_integer()) fail(k, fmt::format("expected an integer, got {}", shown(e)));
    int64_t x = e.get<int64_t>();
    if (x < min || x > max) fail(k, fmt::format("expected an integer in [{}, {}], got {}", min, max, x));
    out.push_back(x);
  }
  return out;
}

JsonReader JsonReader::object(std::string_view key) const {
  const auto& v = need(key);
  if (!v.is_object()) fail(key, fmt::format("expected an object, got {}", shown(v)));
  return JsonReader(v, file_, fmt::format("{}.{}", path_, key));
}

std::vector<JsonReader> JsonReader::objects(std::string_view key) const {
  const auto& v = need(key);
  if (!v.is_array()) fail(key, fmt::format("expected an array of objects, got {}", shown(v)));
  std::vector<JsonReader> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_object()) fail(fmt::format("{}[{}]", key, i), fmt::format("expected an object, got {}", shown(v[i])));
    out.emplace_back(v[i], file_, fmt::format("{}.{}[{}]", path_, key, i));
  }
  return out;
}

void JsonReader::finish() const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (!used_.count(it.key())) {
      if (it.key().rfind("_comment", 0) == 0 || it.key() == "description") continue;  // documentation keys
      // The keys this reader asked for are the ones it knows: the nearest is the likely typo.
      fail(it.key(), "unknown key" + did_you_mean(it.key(), {used_.begin(), used_.end()}));
    }
  }
}

nlohmann::json parse_json_text(std::string_view text, const std::string& name) {
  try {
    return traces::parse_json_checked(text, name);
  } catch (const traces::JsonTextError& e) {
    throw ConfigError(e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::string text;
  try {
    text = traces::read_text_file(path, kMaxConfigBytes);
  } catch (const traces::TraceError& e) {
    throw ConfigError(e.what());
  }
  return parse_json_text(text, path);
}

}  // namespace rm
