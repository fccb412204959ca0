#include "traces/text_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>

#include "traces/trace_error.hpp"

namespace rm::traces {

namespace {

std::string gunzip(const std::string& data, const std::string& path) {
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
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // input ended early
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    throw TraceError(fmt::format("{}: {}", path, rc == Z_BUF_ERROR || rc == Z_OK ? "truncated gzip data"
                                                                                 : "corrupt gzip data"));
  return out;
}

std::string gzip(std::string_view text) {
  z_stream z{};
  // windowBits 15 + 16: gzip wrapper; its header has mtime 0, so output is reproducible.
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw TraceError("cannot start gzip");
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw TraceError("gzip failed");
  return out;
}

}  // namespace

bool has_gz_suffix(std::string_view path) { return path.size() > 3 && path.substr(path.size() - 3) == ".gz"; }

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(fmt::format("{}: cannot open file", path));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw TraceError(fmt::format("{}: read error", path));
  return has_gz_suffix(path) ? gunzip(data, path) : data;
}

void write_text_file_atomic(const std::string& path, std::string_view text) {
  std::string gz;
  std::string_view bytes = text;
  if (has_gz_suffix(path)) {
    gz = gzip(text);
    bytes = gz;
  }
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw TraceError(fmt::format("{}: cannot create temporary file ({})", path, std::strerror(errno)));
  fchmod(fd, 0644);  // mkstemp makes 0600; outputs are meant to be shared
  FILE* f = fdopen(fd, "wb");
  bool ok = f != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (f != nullptr && std::fclose(f) == 0) && ok;
  if (f == nullptr) close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw TraceError(fmt::format("{}: cannot write file ({})", path, std::strerror(err)));
  }
}

}  // namespace rm::traces
