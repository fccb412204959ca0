// Chunked reading and gunzip of one Kineto file (zlib inflate, one member).
#include "traces/kineto_input.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "traces/json_text.hpp"
#include "traces/trace_error.hpp"

namespace rm::traces::kineto_raw {

namespace {

std::string mib(int64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

}  // namespace

InputBuf::~InputBuf() {
  if (gzip_) inflateEnd(&z_);
}

bool InputBuf::refill() {
  if (!started_) start();
  const size_t n = gzip_ ? inflate_some() : plain_some();
  if (n == 0) return false;
  try {  // nlohmann's lexer would take a NUL byte for the end of the text
    refuse_nul_bytes(std::string_view(cur_, n), name_, total_);
  } catch (const JsonTextError& e) {
    throw TraceError(e.what());
  }
  total_ += int64_t(n);
  if (total_ > limit_)
    throw TraceError(fmt::format("{}: {} more than the {} limit for this input", name_,
                                 gzip_ ? "decompresses to" : "is", mib(limit_)));
  return true;
}

size_t InputBuf::read_raw(char* dst, size_t n) {
  if (!file_) {
    const size_t k = std::min(n, memory_.size());
    std::memcpy(dst, memory_.data(), k);
    memory_.remove_prefix(k);
    return k;
  }
  const size_t k = std::fread(dst, 1, n, file_);
  if (k < n && std::ferror(file_)) throw TraceError(fmt::format("{}: read error", name_));
  return k;
}

void InputBuf::start() {
  started_ = true;
  in_len_ = read_raw(in_.data(), in_.size());
  gzip_ = in_len_ >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b;
  if (gzip_) {
    if (inflateInit2(&z_, 15 + 16) != Z_OK) throw TraceError(fmt::format("{}: cannot start gunzip", name_));
    z_.next_in = reinterpret_cast<Bytef*>(in_.data());
    z_.avail_in = static_cast<uInt>(in_len_);
  }
}

size_t InputBuf::plain_some() {
  if (pending_plain_) {  // the first chunk, read to look for the gzip magic
    pending_plain_ = false;
    if (in_len_ > 0) {
      set_chunk(in_.data(), in_.data() + in_len_);
      return in_len_;
    }
  }
  const size_t k = read_raw(in_.data(), in_.size());
  set_chunk(in_.data(), in_.data() + k);
  return k;
}

size_t InputBuf::inflate_some() {
  if (ended_) return 0;
  z_.next_out = reinterpret_cast<Bytef*>(out_.data());
  z_.avail_out = static_cast<uInt>(out_.size());
  while (z_.avail_out == out_.size()) {  // until some output or the end
    if (z_.avail_in == 0) {
      in_len_ = read_raw(in_.data(), in_.size());
      if (in_len_ == 0) throw TraceError(fmt::format("{}: truncated gzip data", name_));
      z_.next_in = reinterpret_cast<Bytef*>(in_.data());
      z_.avail_in = static_cast<uInt>(in_len_);
    }
    const int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      ended_ = true;
      char extra;
      if (z_.avail_in > 0 || read_raw(&extra, 1) > 0)
        throw TraceError(fmt::format("{}: bytes after the end of the gzip stream (expected one gzip member)", name_));
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) throw TraceError(fmt::format("{}: corrupt gzip data", name_));
  }
  const size_t n = out_.size() - z_.avail_out;
  set_chunk(out_.data(), out_.data() + n);
  return n;
}

}  // namespace rm::traces::kineto_raw
