// How every output of ours reaches its destination: whole-file writes that a
// reader never sees half-done (gzip chosen by a ".gz" suffix), the standard
// output written by length, and the one error type for a destination that
// cannot be written (docs/robustness.md, "Outputs").
#pragma once

#include <string>
#include <string_view>

#include "traces/trace_error.hpp"

namespace rm::traces {

// A destination that cannot be written: an empty path, a directory, a missing
// folder, a FIFO with no reader, a full disk. The CLIs exit 2 on it, as on
// other bad input. One line, naming the path.
struct OutputError : TraceError {
  using TraceError::TraceError;
};

// Why `path` cannot be a destination, judged before any work is done: empty,
// a directory, or in a folder that does not exist. Empty when it may be one
// (writing can still fail later: permissions, a full disk, no FIFO reader).
std::string output_path_problem(const std::string& path);

// Writes `text` to `path`; gzips when the path ends in ".gz". A regular file
// (or a new one) is replaced atomically: the bytes go to an unnamed file in
// the target's folder (O_TMPFILE) that gets its name only when complete, so
// even a SIGKILL leaves nothing behind; where the filesystem has no O_TMPFILE,
// to a named temporary beside it, then a rename (that temporary is removed on
// error and on SIGINT/SIGTERM, not on SIGKILL). A symlink is followed (the link
// stays). A FIFO is written in place when a reader has it open (refused when
// none has: the write would block forever); a device (/dev/null, /dev/stdout)
// is written in place, never replaced; "-" is standard output; a directory is
// refused. Throws OutputError naming the path.
// The gzip header carries no timestamp, so the same text gives the same bytes.
void write_text_file_atomic(const std::string& path, std::string_view text);

// Writes `text` to standard output by its length (a NUL byte in a name is
// written, never a cut), all of it or OutputError.
void write_standard_output(std::string_view text);

// Testing aid: called once the bytes are complete and before they get the
// target's name; a test kills the process here to show that nothing is left.
void set_before_naming_hook(void (*hook)());

}  // namespace rm::traces
