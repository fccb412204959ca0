// f(0) ... f(n-1) on up to `threads` threads (the caller's among them), each
// index once, in no set order; with threads <= 1 in order on the caller. For
// independent work whose results land in slots of their own, so the answer
// does not depend on the thread count. The first exception (by index) is
// rethrown once every index has run. The helper threads are kept between
// calls: the counting code caches per thread the layout of the last partition
// it saw (sparsity/count.cpp, block_count.cpp), and a thread made afresh for
// every layer would rebuild it every time. While another caller holds the
// helpers, a call runs on its own thread alone. Here, below every model
// library, so that any of them can spread its per-head work over the cores.
#pragma once

#include <cstddef>
#include <functional>

namespace rm {

void parallel_for(size_t n, int threads, const std::function<void(size_t)>& f);

// The threads a single command may use for its own per-head work: the
// machine's, at most 8 (beyond that the serial parts dominate).
int default_threads();

}  // namespace rm
