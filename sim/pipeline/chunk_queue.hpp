// The hand-offs of a streamed run (Session::simulate_streamed) between its
// threads: from the generator to the engine (engine::ReadyChunk), and from the
// engine to the report (retired chunks). Chunks in order, bounded by the ops
// queued so that the producer runs ahead by at most generate::kStreamQueueOps ops
// or one chunk, whichever is more (the memory estimate counts both,
// generate::estimate_stream_footprint). Either side can stop the other: the
// producer by failing (its exception goes to the consumer), the consumer by
// cancelling (the producer's next push throws Cancelled). Chunk: any type with
// a vector `ops`.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>

#include "sim/engine/stream_run.hpp"
#include "sim/generate/footprint.hpp"

namespace rm::pipeline {

struct QueueCancelled {};

template <class Chunk>
class ChunkQueue {
 public:
  using Cancelled = QueueCancelled;
  struct Item {
    Chunk chunk;
    bool last = false;
  };

  // Producer side: waits for room; throws Cancelled once the consumer cancelled.
  void push(Chunk c, bool last) {
    std::unique_lock lock(m_);
    const auto n = int64_t(c.ops.size());
    room_.wait(lock, [&] { return cancelled_ || items_.empty() || queued_ + n <= generate::kStreamQueueOps; });
    if (cancelled_) throw Cancelled{};
    queued_ += n;
    items_.push_back({std::move(c), last});
    ready_.notify_one();
  }
  // Producer side: it stopped on an error, which pop rethrows.
  void fail(std::exception_ptr e) {
    std::lock_guard lock(m_);
    error_ = std::move(e);
    ready_.notify_one();
  }
  // Consumer side: the next chunk, in order; rethrows the producer's error once the chunks before it are taken.
  Item pop() {
    std::unique_lock lock(m_);
    ready_.wait(lock, [&] { return !items_.empty() || error_; });
    if (items_.empty()) std::rethrow_exception(error_);
    Item it = std::move(items_.front());
    items_.pop_front();
    queued_ -= int64_t(it.chunk.ops.size());
    room_.notify_one();
    return it;
  }
  // Consumer side: stop the producer (its waiting or next push throws Cancelled).
  void cancel() {
    std::lock_guard lock(m_);
    cancelled_ = true;
    items_.clear();
    room_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable ready_, room_;
  std::deque<Item> items_;
  int64_t queued_ = 0;
  bool cancelled_ = false;
  std::exception_ptr error_;
};

}  // namespace rm::pipeline
