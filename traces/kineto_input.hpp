// The text of one Kineto file as a stream of bytes for the parser: read from
// a file or from memory in chunks, gunzipped on the way when it starts with
// the gzip magic, at most `limit` bytes of text (traces/kineto_read.cpp).
// Internal to traces/.
#pragma once

#include <zlib.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

namespace rm::traces::kineto_raw {

// `file` (owned by the caller) when not null, else `memory`; `name` for messages.
class InputBuf {
 public:
  InputBuf(FILE* file, std::string_view memory, std::string name, int64_t limit)
      : file_(file), memory_(memory), name_(std::move(name)), limit_(limit) {}
  ~InputBuf();
  InputBuf(const InputBuf&) = delete;
  InputBuf& operator=(const InputBuf&) = delete;
  int64_t text_bytes() const { return total_; }

  // The parser's view: the current byte, and moving on; at_end() refills.
  char peek() const { return *cur_; }
  void next() { ++cur_; }
  bool at_end() { return cur_ == end_ && !refill(); }

 private:
  bool refill();
  void start();
  size_t read_raw(char* dst, size_t n);
  size_t plain_some();
  size_t inflate_some();
  void set_chunk(const char* begin, const char* end) {
    cur_ = begin;
    end_ = end;
  }

  FILE* file_;
  std::string_view memory_;
  std::string name_;
  int64_t limit_;
  bool started_ = false, gzip_ = false, ended_ = false, pending_plain_ = true;
  z_stream z_{};
  std::array<char, 1 << 16> in_{};
  size_t in_len_ = 0;
  std::array<char, 1 << 18> out_{};
  int64_t total_ = 0;
  const char* cur_ = nullptr;
  const char* end_ = nullptr;
};

// An input iterator over InputBuf for nlohmann's parser (faster than an
// istream: no virtual call per byte); the default one is the end.
class InputIter {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;
  InputIter() = default;
  explicit InputIter(InputBuf* b) : b_(b) {}
  char operator*() const { return b_->peek(); }
  InputIter& operator++() {
    b_->next();
    return *this;
  }
  bool operator==(const InputIter& o) const { return done() == o.done(); }
  bool operator!=(const InputIter& o) const { return !(*this == o); }

 private:
  bool done() const { return !b_ || b_->at_end(); }
  InputBuf* b_ = nullptr;
};

}  // namespace rm::traces::kineto_raw
