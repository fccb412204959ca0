#include "sim/search/evaluate.hpp"

#include <algorithm>
#include <atomic>
#include <map>
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

Outcome evaluate_one(const Experiment& e, engine::EngineKind kind, pipeline::Session& session, bool bound_by) {
  Outcome out;
  try {
    generate::check_fits(generate::estimate_footprint(e, generate::RunKind::simulate), "this point");
    pipeline::PointResult r = session.run_point(e, kind, bound_by);
    out.ops = r.ops;
    out.generator = std::move(r.generator);
    out.report = std::move(r.report);
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

  // Work goes out in tasks of points with equal Schedule inputs (their input
  // order kept), so a worker's Session reuses one Schedule across a group's
  // cluster what-ifs (Session::run_point); a task holds at most a 1/(2 workers)
  // share of the points, so one large group still spreads over every worker.
  std::vector<std::vector<int64_t>> tasks;
  {
    const int64_t cap = std::max<int64_t>(1, (n + 2 * workers - 1) / (2 * workers));
    std::map<std::string, size_t> open;  // key -> the task now filling
    for (int64_t i = 0; i < n; ++i) {
      auto [it, fresh] = open.try_emplace(pipeline::schedule_key(points[size_t(i)]), tasks.size());
      if (fresh || int64_t(tasks[it->second].size()) == cap) {
        it->second = tasks.size();
        tasks.emplace_back();
      }
      tasks[it->second].push_back(i);
    }
  }
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  std::atomic<int64_t> next{0};
  std::mutex progress_mutex;
  int64_t done = 0;
  std::exception_ptr failure;  // anything but a ConfigError: a bug, rethrown on the caller's thread
  std::deque<pipeline::Session> fresh;
  std::deque<pipeline::Session>& pool = o.sessions ? *o.sessions : fresh;
  while (pool.size() < size_t(workers)) pool.emplace_back();
  auto work = [&](int w) {
    pipeline::Session& session = pool[size_t(w)];
    for (int64_t t = next++; t < n_tasks; t = next++)
      for (int64_t i : tasks[size_t(t)]) {
        try {
          out[size_t(i)] = evaluate_one(points[size_t(i)], o.engine, session, o.bound_by);
        } catch (...) {
          std::lock_guard lock(progress_mutex);
          if (!failure) failure = std::current_exception();
          next = n_tasks;  // stop handing out points
          session.release_schedule();
          return;
        }
        std::lock_guard lock(progress_mutex);
        ++done;
        if (o.progress) o.progress(done, n);
      }
    session.release_schedule();
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
