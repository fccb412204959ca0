// The SAX handler behind parse_json_checked (traces/json_text.hpp): builds
// the tree while enforcing the reader limits as the text streams by. It
// replaces nlohmann's callback parser, whose tree builder scans the parent
// container at every object end (quadratic in the objects of one array).
// Each event here costs O(1), a key O(log keys) (the object's own map
// detects the repeat). A template over the json type so a test can count
// container scans. Internal to traces/.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "traces/json_text.hpp"

namespace rm::traces {

template <class Json>
class JsonDomBuilder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  explicit JsonDomBuilder(const std::string& name) : name_(name) {}

  Json take() { return std::move(root_); }

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool b) { return put(Json(b)); }
  bool number_integer(number_integer_t x) { return put(Json(x)); }
  bool number_unsigned(number_unsigned_t x) { return put(Json(x)); }
  bool number_float(number_float_t x, const string_t&) { return put(Json(x)); }
  bool string(string_t& s) { return put(Json(std::move(s))); }
  bool binary(binary_t& b) { return put(Json::binary(std::move(b))); }

  bool start_object(std::size_t) { return open(Json::value_t::object); }
  bool start_array(std::size_t) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    auto& obj = open_.back()->template get_ref<typename Json::object_t&>();
    auto [it, fresh] = obj.emplace(k, Json());
    if (!fresh) reject(fmt::format("key \"{}\" appears twice in one object", k));
    slot_ = &it->second;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    const bool range = e.id == 406;  // a number no double holds (1e999)
    throw JsonTextError(fmt::format("{}: {} ({})", name_, range ? "a number is out of range" : "not valid JSON",
                                    json_error_reason(e.what())));
  }

 private:
  [[noreturn]] void reject(const std::string& what) const { throw JsonTextError(fmt::format("{}: {}", name_, what)); }

  // Where the next value goes: the root, the next element of the open array,
  // or the value of the key just read in the open object.
  Json* place(Json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      auto& arr = parent.template get_ref<typename Json::array_t&>();
      arr.push_back(std::move(v));
      return &arr.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool put(Json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(typename Json::value_t t) {
    if (open_.size() >= std::size_t(kMaxJsonDepth)) reject(fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    open_.push_back(place(Json(t)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  const std::string& name_;
  Json root_;
  std::vector<Json*> open_;  // the containers being filled, innermost last
  Json* slot_ = nullptr;     // the value of the last key read
};

}  // namespace rm::traces
