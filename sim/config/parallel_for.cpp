#include "sim/config/parallel_for.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace rm {
namespace {

// One job at a time: the caller and up to helpers_.size() threads take
// indices from `next` until none is left; the caller waits for the helpers
// that joined the job to leave it before returning.
class Helpers {
 public:
  ~Helpers() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : helpers_) t.join();
  }

  // False when another caller holds the helpers.
  bool run(size_t n, size_t workers, const std::function<void(size_t)>& f) {
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    grow(workers - 1);
    std::vector<std::exception_ptr> errors(n);
    {
      std::lock_guard lock(m_);
      job_ = {&f, &errors, n, std::min(workers - 1, helpers_.size())};
      next_ = 0;
      joined_ = 0;
      left_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    work(job_);
    {
      std::unique_lock lock(m_);
      // Helpers that never woke for this job must not take it later: close it.
      job_.helpers = joined_;
      done_.wait(lock, [&] { return left_ == joined_; });
      job_ = {};
    }
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    return true;
  }

 private:
  struct Job {
    const std::function<void(size_t)>* f = nullptr;
    std::vector<std::exception_ptr>* errors = nullptr;
    size_t n = 0;
    size_t helpers = 0;  // how many helpers may join
  };

  void work(const Job& job) {
    for (size_t i; (i = next_.fetch_add(1)) < job.n;) {
      try {
        (*job.f)(i);
      } catch (...) {
        (*job.errors)[i] = std::current_exception();
      }
    }
  }

  void grow(size_t want) {
    while (helpers_.size() < want) {
      try {
        helpers_.emplace_back([this] { loop(); });
      } catch (const std::system_error&) {
        return;  // no more threads to be had: the ones there (and the caller) do the work
      }
    }
  }

  void loop() {
    uint64_t seen = 0;
    std::unique_lock lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (joined_ >= job_.helpers) continue;
      ++joined_;
      const Job job = job_;
      lock.unlock();
      work(job);
      lock.lock();
      ++left_;
      done_.notify_all();
    }
  }

  std::mutex busy_;  // held by the caller whose job runs
  std::mutex m_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> helpers_;
  Job job_;
  std::atomic<size_t> next_{0};
  size_t joined_ = 0, left_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

Helpers& helpers() {
  static Helpers h;
  return h;
}

}  // namespace

void parallel_for(size_t n, int threads, const std::function<void(size_t)>& f) {
  const size_t workers = std::min(n, static_cast<size_t>(std::max(threads, 1)));
  if (workers > 1 && helpers().run(n, workers, f)) return;
  for (size_t i = 0; i < n; ++i) f(i);
}

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

}  // namespace rm
