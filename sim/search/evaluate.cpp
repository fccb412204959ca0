#include "sim/search/evaluate.hpp"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "sim/generate/footprint.hpp"

namespace rm::search {

int worker_count(int jobs) {
  if (jobs > 0) return jobs;
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

Outcome evaluate_one(const Experiment& e, engine::EngineKind kind, pipeline::Session& session) {
  Outcome out;
  try {
    generate::check_fits(generate::estimate_footprint(e, generate::RunKind::simulate), "this point");
    pipeline::Simulation sim = session.simulate(e, kind);
    out.ops = static_cast<int64_t>(sim.schedule.ops.size());
    out.generator = sim.schedule.generator;
    out.report = std::move(sim.report);
    out.ok = true;
  } catch (const ConfigError& err) {
    out.error = err.what();
  }
  return out;
}

std::vector<Outcome> evaluate(const std::vector<Experiment>& points, const EvaluateOptions& o) {
  const int64_t n = static_cast<int64_t>(points.size());
  std::vector<Outcome> out(points.size());
  const bool simgrid = o.engine == engine::EngineKind::simgrid;
  const int workers = simgrid ? 1 : std::max(1, std::min<int>(worker_count(o.jobs), static_cast<int>(n)));

  std::atomic<int64_t> next{0};
  std::mutex progress_mutex;
  int64_t done = 0;
  std::exception_ptr failure;  // anything but a ConfigError: a bug, rethrown on the caller's thread
  std::deque<pipeline::Session> fresh;
  std::deque<pipeline::Session>& pool = o.sessions ? *o.sessions : fresh;
  while (pool.size() < size_t(workers)) pool.emplace_back();
  auto work = [&](int w) {
    pipeline::Session& session = pool[size_t(w)];
    for (int64_t i = next++; i < n; i = next++) {
      try {
        out[i] = evaluate_one(points[i], o.engine, session);
      } catch (...) {
        std::lock_guard lock(progress_mutex);
        if (!failure) failure = std::current_exception();
        next = n;  // stop handing out points
        return;
      }
      std::lock_guard lock(progress_mutex);
      ++done;
      if (o.progress) o.progress(done, n);
    }
  };
  if (workers == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(workers);
    for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
    for (auto& t : threads) t.join();
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace rm::search
