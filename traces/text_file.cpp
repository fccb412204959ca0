#include "traces/text_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <zlib.h>

#include "traces/trace_error.hpp"

namespace rm::traces {

namespace {

std::string mib(int64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

// Closes a descriptor on every way out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Up to `n` bytes into `dst`; 0 at the end of the file.
size_t read_some(int fd, char* dst, size_t n, const std::string& path) {
  for (;;) {
    const ssize_t k = ::read(fd, dst, n);
    if (k >= 0) return size_t(k);
    if (errno != EINTR) throw TraceError(fmt::format("{}: read error ({})", path, std::strerror(errno)));
  }
}

// Appends `n` bytes to `out`, refusing before `out` would pass `limit`; the
// capacity grows geometrically but never past `limit`, so what is held stays
// within the limit (a 2.2 GiB gzip of spaces once peaked at 5.3 GB).
void append_within(std::string& out, const char* bytes, size_t n, int64_t limit, const std::string& refusal) {
  if (int64_t(out.size() + n) > limit) throw TraceError(refusal);
  if (out.size() + n > out.capacity())
    out.reserve(size_t(std::min(limit, std::max(int64_t(out.size() + n), 2 * int64_t(out.capacity())))));
  out.append(bytes, n);
}

// Inflates one gzip member from `fd` as it is read (never the whole
// compressed file at once), refusing as soon as the text passes `limit`.
std::string gunzip(int fd, int64_t file_bytes, const std::string& path, int64_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw TraceError(fmt::format("{}: cannot start gunzip", path));
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  const std::string too_big = fmt::format("{}: decompresses to more than the {} limit for this input", path, mib(limit));
  std::string out;
  char in[1 << 16], buf[1 << 16];
  int64_t consumed = 0;  // compressed bytes handed to inflate
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      const size_t n = read_some(fd, in, sizeof in, path);
      if (n == 0) break;  // input ended early
      z.next_in = reinterpret_cast<Bytef*>(in);
      z.avail_in = static_cast<uInt>(n);
      consumed += int64_t(n);
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      throw TraceError(fmt::format("{}: corrupt gzip data", path));
    append_within(out, buf, sizeof buf - z.avail_out, limit, too_big);
  }
  if (rc != Z_STREAM_END) throw TraceError(fmt::format("{}: truncated gzip data", path));
  const int64_t trailing = std::max(int64_t(z.avail_in), file_bytes - (consumed - int64_t(z.avail_in)));
  if (trailing > 0)
    throw TraceError(fmt::format("{}: {} bytes after the end of the gzip stream (expected one gzip member)", path,
                                 trailing));
  return out;
}

std::string_view file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

bool has_gz_suffix(std::string_view path) { return path.size() > 3 && path.substr(path.size() - 3) == ".gz"; }

int open_input_file(const std::string& path, int64_t* size) {
  // O_NONBLOCK: opening a FIFO with no writer would block forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw TraceError(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw TraceError(fmt::format("{}: cannot open file ({})", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) throw TraceError(fmt::format("{}: is a directory, expected a file", path));
    throw TraceError(fmt::format("{}: is {}, expected a regular file", path, file_kind(st.st_mode)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (size) *size = st.st_size;
  return fd;
}

std::string read_text_file(const std::string& path, int64_t limit) {
  int64_t size = 0;
  const Fd fd(open_input_file(path, &size));
  if (has_gz_suffix(path)) return gunzip(fd.get(), size, path, limit);
  const std::string too_big = fmt::format("{}: larger than the {} limit for this input", path, mib(limit));
  if (size > limit) throw TraceError(too_big);
  // Read to the end, not to `size`: the file may grow while it is read.
  std::string data;
  data.reserve(size_t(size));
  char buf[1 << 16];
  while (const size_t n = read_some(fd.get(), buf, sizeof buf, path)) append_within(data, buf, n, limit, too_big);
  return data;
}

}  // namespace rm::traces
