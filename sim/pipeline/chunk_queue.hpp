// The hand-off between a streamed run's generator, on a thread of its own, and
// the engine on the caller's (Session::simulate_streamed): chunks in order,
// bounded by the ops queued so that the generator runs ahead by at most
// generate::kStreamQueueOps ops or one chunk, whichever is more (the memory
// estimate counts it, generate::estimate_stream_footprint). Either side can stop the other: the
// generator by failing (its exception goes to the engine's side), the engine by
// cancelling (the generator's next push throws Cancelled).
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

class ChunkQueue {
 public:
  struct Cancelled {};
  struct Item {
    engine::ReadyChunk chunk;
    bool last = false;
  };

  // Generator side: waits for room; throws Cancelled once the engine side cancelled.
  void push(engine::ReadyChunk c, bool last) {
    std::unique_lock lock(m_);
    const auto n = int64_t(c.ops.size());
    room_.wait(lock, [&] { return cancelled_ || items_.empty() || queued_ + n <= generate::kStreamQueueOps; });
    if (cancelled_) throw Cancelled{};
    queued_ += n;
    items_.push_back({std::move(c), last});
    ready_.notify_one();
  }
  // Generator side: it stopped on an error, which pop rethrows.
  void fail(std::exception_ptr e) {
    std::lock_guard lock(m_);
    error_ = std::move(e);
    ready_.notify_one();
  }
  // Engine side: the next chunk, in order; rethrows the generator's error once the chunks before it are taken.
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
  // Engine side: stop the generator (its waiting or next push throws Cancelled).
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
