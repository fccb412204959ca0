#include "traces/json_text.hpp"

#include <cstring>

#include <fmt/format.h>

#include "traces/json_dom_builder.hpp"

namespace rm::traces {

std::string json_error_reason(const std::string& what) {
  std::string msg = what;
  if (const auto close = msg.find("] "); close != std::string::npos && msg.starts_with("[json.exception."))
    msg.erase(0, close + 2);
  // "...; last read: '<bytes>'" or "...; last read: '<bytes>'; expected ...".
  const std::string quoted = "; last read: '";
  if (const auto from = msg.find(quoted); from != std::string::npos) {
    const auto expected = msg.rfind("'; expected ");
    msg.erase(from, expected != std::string::npos && expected >= from + quoted.size() ? expected + 1 - from
                                                                                        : std::string::npos);
  }
  return msg;
}

void refuse_nul_bytes(std::string_view text, const std::string& name, int64_t offset) {
  // nlohmann's lexer reads a NUL byte as the end of the input, so whatever
  // follows one would be ignored; JSON text never holds one (in a string it
  // must be written \u0000).
  if (const void* nul = std::memchr(text.data(), '\0', text.size()))
    throw JsonTextError(fmt::format("{}: a NUL byte at byte offset {} (JSON text never holds one)", name,
                                    offset + (static_cast<const char*>(nul) - text.data())));
}

nlohmann::json parse_json_checked(std::string_view text, const std::string& name) {
  refuse_nul_bytes(text, name);
  JsonDomBuilder<nlohmann::json> builder(name);
  nlohmann::json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json, true);
  return builder.take();
}

}  // namespace rm::traces
