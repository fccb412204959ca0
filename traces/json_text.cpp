#include "traces/json_text.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace rm::traces {

namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; keep what follows.
std::string reason(const std::exception& e) {
  std::string msg = e.what();
  const auto close = msg.find("] ");
  return close == std::string::npos ? msg : msg.substr(close + 2);
}

// Keys seen in each open object, innermost last. Objects hold a handful of
// keys, so a linear scan beats a set until one grows large.
class KeyStack {
 public:
  void open() { frames_.emplace_back(); }
  void close() {
    if (!frames_.empty()) frames_.pop_back();
  }
  bool add(const std::string& key) {  // false when the innermost object already has it
    if (frames_.empty()) return true;
    auto& keys = frames_.back();
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) return false;
    keys.push_back(key);
    return true;
  }

 private:
  std::vector<std::vector<std::string>> frames_;
};

struct Rejected {
  std::string what;
};

}  // namespace

nlohmann::json parse_json_checked(std::string_view text, const std::string& name) {
  KeyStack keys;
  using event = nlohmann::json::parse_event_t;
  auto check = [&](int depth, event e, nlohmann::json& parsed) {
    switch (e) {
      case event::object_start:
        if (depth >= kMaxJsonDepth) throw Rejected{fmt::format("nested deeper than {} levels", kMaxJsonDepth)};
        keys.open();
        break;
      case event::array_start:
        if (depth >= kMaxJsonDepth) throw Rejected{fmt::format("nested deeper than {} levels", kMaxJsonDepth)};
        break;
      case event::object_end: keys.close(); break;
      case event::key: {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!keys.add(k)) throw Rejected{fmt::format("key \"{}\" appears twice in one object", k)};
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const Rejected& r) {
    throw JsonTextError(fmt::format("{}: {}", name, r.what));
  } catch (const nlohmann::json::parse_error& e) {
    throw JsonTextError(fmt::format("{}: not valid JSON ({})", name, reason(e)));
  } catch (const nlohmann::json::out_of_range& e) {  // 406: a number no double holds
    throw JsonTextError(fmt::format("{}: a number is out of range ({})", name, reason(e)));
  }
}

}  // namespace rm::traces
