// Whole-file text I/O shared by every writer of ours: gzip chosen by a ".gz"
// suffix, and writes that are atomic (a temporary file beside the target,
// then a rename), so a reader never sees a half-written file.
#pragma once

#include <string>
#include <string_view>

namespace rm::traces {

bool has_gz_suffix(std::string_view path);

// Reads the whole file; gunzips when the path ends in ".gz". Throws TraceError.
std::string read_text_file(const std::string& path);

// Writes `text` to `path` atomically; gzips when the path ends in ".gz".
// The gzip header carries no timestamp, so the same text gives the same bytes.
void write_text_file_atomic(const std::string& path, std::string_view text);

}  // namespace rm::traces
