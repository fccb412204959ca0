// Whole-file text I/O shared by every reader and writer of ours: gzip chosen by
// a ".gz" suffix. The writing side (atomic writes, the standard output) is
// traces/text_write.hpp, included here for the callers of both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "traces/text_write.hpp"

namespace rm::traces {

bool has_gz_suffix(std::string_view path);

// The most a reader takes in (after gunzip) unless it says less: far above any
// trace we read, far below what would exhaust memory (`/dev/zero` as input).
inline constexpr int64_t kMaxInputBytes = int64_t(2) << 30;

// Reads the whole file; gunzips when the path ends in ".gz" (one gzip member,
// nothing after it). Throws TraceError naming the file for a directory, an
// unreadable file, or more than `limit` bytes read or decompressed.
std::string read_text_file(const std::string& path, int64_t limit = kMaxInputBytes);

}  // namespace rm::traces
