// f(0) ... f(n-1) on up to `threads` threads (the caller's among them), each
// index once, in no set order; with threads <= 1 in order on the caller. For
// independent work whose results land in slots of their own, so the answer
// does not depend on the thread count. The first exception (by index) is
// rethrown once every index has run. Here, below every model library, so
// that any of them can spread its per-head work over the cores.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace rm {

template <class F>
void parallel_for(size_t n, int threads, F&& f) {
  const size_t workers = std::min(n, static_cast<size_t>(std::max(threads, 1)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(n);
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones running (and the caller) finish the work
    }
  }
  work();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The threads a single command may use for its own per-head work: the
// machine's, at most 8 (beyond that the serial parts dominate).
inline int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

}  // namespace rm
