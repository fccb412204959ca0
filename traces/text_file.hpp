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

// Opens `path` for reading: a regular file only (a FIFO would block open(),
// a device never ends, a directory is no text). Returns the descriptor (the
// caller closes it) and, when `size` is given, the file's size. Throws
// TraceError naming the file and what it is.
int open_input_file(const std::string& path, int64_t* size = nullptr);

// Reads the whole file (open_input_file's rules); gunzips when the path ends
// in ".gz" (one gzip member, nothing after it) as it reads. Throws TraceError
// naming the file for what open_input_file refuses, an unreadable file, or
// more than `limit` bytes read or decompressed (refused as the limit is
// crossed: it holds at most `limit` bytes of text).
std::string read_text_file(const std::string& path, int64_t limit = kMaxInputBytes);

}  // namespace rm::traces
