#include "traces/text_file.hpp"


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

std::string gunzip(const std::string& data, const std::string& path, int64_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw TraceError(fmt::format("{}: cannot start gunzip", path));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (int64_t(out.size()) > limit) {
      inflateEnd(&z);
      throw TraceError(fmt::format("{}: decompresses to more than the {} limit for this input", path, mib(limit)));
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // input ended early
  }
  const uInt trailing = z.avail_in;
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    throw TraceError(fmt::format("{}: {}", path, rc == Z_BUF_ERROR || rc == Z_OK ? "truncated gzip data"
                                                                                 : "corrupt gzip data"));
  if (trailing > 0)
    throw TraceError(fmt::format("{}: {} bytes after the end of the gzip stream (expected one gzip member)", path,
                                 trailing));
  return out;
}

}  // namespace

bool has_gz_suffix(std::string_view path) { return path.size() > 3 && path.substr(path.size() - 3) == ".gz"; }

std::string read_text_file(const std::string& path, int64_t limit) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw TraceError(fmt::format("{}: is a directory, expected a file", path));
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TraceError(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  // Read in chunks up to the limit: the input may be a device or a pipe with no size.
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    data.append(buf, n);
    if (int64_t(data.size()) > limit) {
      std::fclose(f);
      throw TraceError(fmt::format("{}: larger than the {} limit for this input", path, mib(limit)));
    }
  }
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw TraceError(fmt::format("{}: read error", path));
  return has_gz_suffix(path) ? gunzip(data, path, limit) : data;
}

}  // namespace rm::traces
