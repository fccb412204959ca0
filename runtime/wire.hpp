// The bytes ranks send rank 0 (output slices for --check, dense outputs): plain
// values and length-prefixed vectors in host byte order (every rank runs the same
// build), read back with bounds checks so a truncated message is an error, not
// a wild read.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rm::runtime::wire {

template <class T>
void append(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
void append_vec(std::string& s, const std::vector<T>& v) {
  append(s, int64_t(v.size()));
  s.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

struct Reader {
  std::string_view in;
  const char* what;  // names the message in errors
  template <class T>
  T take() {
    if (in.size() < sizeof(T)) throw std::runtime_error(std::string(what) + ": truncated message");
    T v;
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  template <class T>
  std::vector<T> take_vec() {
    const auto n = take<int64_t>();
    if (n < 0 || uint64_t(n) > in.size() / sizeof(T)) throw std::runtime_error(std::string(what) + ": truncated message");
    std::vector<T> v(static_cast<size_t>(n));
    std::memcpy(v.data(), in.data(), size_t(n) * sizeof(T));
    in.remove_prefix(size_t(n) * sizeof(T));
    return v;
  }
};

}  // namespace rm::runtime::wire
