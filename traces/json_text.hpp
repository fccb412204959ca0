// Parsing untrusted JSON text: every reader of ours (configs, `--set` values,
// Schedules, Timelines, `diff` inputs) parses through here, so one set of limits holds
// everywhere and each rejection is one line naming the text:
// nesting deeper than kMaxJsonDepth (deeper values would crash recursive
// copies and dumps), a key repeated in one object (nlohmann keeps the last
// silently), a number a double cannot hold (1e999), invalid UTF-8, a NUL
// byte (nlohmann would stop reading there), and syntax errors with their
// line and column (never the bytes read). Linear in the text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rm::traces {

inline constexpr int kMaxJsonDepth = 256;

// The one-line reason; callers wrap it in their own error type.
struct JsonTextError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses `text`; throws JsonTextError "NAME: <what>" on any of the above.
nlohmann::json parse_json_checked(std::string_view text, const std::string& name);

// What a nlohmann parse error says, for a one-line message: its
// "[json.exception.parse_error.101] " prefix dropped, and the bytes it quotes
// ("; last read: 'root:x:0'") too — the position and the reason stay. A config
// may name a file that is no JSON at all (/etc/passwd); its content is not echoed.
std::string json_error_reason(const std::string& what);

// Throws JsonTextError "NAME: a NUL byte at byte offset N ..." when `text`
// holds one; for readers with a JSON parser of their own, which may pass the
// text in chunks (`offset`: where this chunk starts in the whole text).
void refuse_nul_bytes(std::string_view text, const std::string& name, int64_t offset = 0);

}  // namespace rm::traces
