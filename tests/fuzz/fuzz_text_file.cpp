// libFuzzer harness: the file layer every reader opens its input through
// (traces::read_text_file), on the input written to a plain file and to a
// ".gz" file (read as a gzip stream), with a small limit so a stream that
// inflates past it is refused, not held. A plain file reads back as its bytes;
// what reads (either way) must write with write_text_file_atomic, gzipped,
// and read back the same. Expected answers: text, or rm::traces::TraceError.
#include <string>

#include "traces/text_file.hpp"
#include "traces/trace_error.hpp"
#include "tests/fuzz/fuzz_files.hpp"

namespace {

constexpr int64_t kLimit = 1 << 20;  // 1 MiB: the largest input the fuzz stage makes (-max_len)

void round_trip(const std::string& text) {
  const std::string path = rm::fuzz::scratch_dir() + "/written.txt.gz";
  try {
    rm::traces::write_text_file_atomic(path, text);
  } catch (const rm::traces::TraceError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("the writer refuses text the reader gave");
  }
  std::string again;
  try {
    again = rm::traces::read_text_file(path, kLimit);
  } catch (const rm::traces::TraceError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    rm::fuzz::finding("a written .gz file does not read back");
  }
  if (again != text) rm::fuzz::finding("a .gz round trip changed the text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = rm::fuzz::as_text(data, size);
  const std::string plain = rm::fuzz::write_scratch("input.txt", bytes);
  try {
    const std::string text = rm::traces::read_text_file(plain, kLimit);
    if (text != bytes) rm::fuzz::finding("a plain file did not read as its bytes");
    round_trip(text);
  } catch (const rm::traces::TraceError&) {
    if (int64_t(size) <= kLimit) rm::fuzz::finding("a plain file within the limit was refused");
  }
  const std::string gz = rm::fuzz::write_scratch("input.txt.gz", bytes);
  try {
    const std::string text = rm::traces::read_text_file(gz, kLimit);
    if (int64_t(text.size()) > kLimit) rm::fuzz::finding("a .gz file inflated past the limit was read");
    round_trip(text);
  } catch (const rm::traces::TraceError&) {
  }
  return 0;
}
