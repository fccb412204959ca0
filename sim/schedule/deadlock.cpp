#include "sim/schedule/deadlock.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace rm::schedule {

namespace {

struct StreamRun {
  std::vector<OpId> ops;  // id order
  size_t head = 0;        // first op not yet finished
  size_t run_end = 0;     // one past the run that starts with head (joined ops)
  bool started = false;   // the run at head has started
};

class AbstractRun {
 public:
  AbstractRun(const Schedule& s, const CommMatching& m) : s_(s), m_(m) {
    const size_t n = s.ops.size();
    stream_of_.resize(n);
    deps_left_.resize(n);
    started_.assign(n, false);
    done_.assign(n, false);
    call_started_.assign(m.calls.size(), 0);
    std::map<std::pair<int, int>, size_t> index;
    for (const Op& op : s.ops) {
      auto [it, fresh] = index.try_emplace({op.rank, op.stream}, streams_.size());
      if (fresh) streams_.emplace_back();
      streams_[it->second].ops.push_back(op.id);
      stream_of_[static_cast<size_t>(op.id)] = it->second;
      deps_left_[static_cast<size_t>(op.id)] = static_cast<int>(op.deps.size());
    }
    dependents_.resize(n);
    for (const Op& op : s.ops)
      for (OpId d : op.deps) dependents_[static_cast<size_t>(d)].push_back(op.id);
  }

  void run() {
    for (size_t i = 0; i < streams_.size(); ++i) work_.push_back(i);
    while (!work_.empty()) {
      size_t k = work_.back();
      work_.pop_back();
      advance(k);
    }
  }

  std::vector<Problem> problems() const {
    size_t stuck = static_cast<size_t>(std::count(done_.begin(), done_.end(), false));
    std::vector<Problem> out;
    for (const auto& st : streams_) {
      if (st.head == st.ops.size()) continue;
      OpId op = st.ops[st.head];
      out.push_back({ProblemKind::deadlock, op,
                     fmt::format("{}: deadlock ({} ops never run): {}", describe(s_, op), stuck, why(op, st))});
    }
    std::sort(out.begin(), out.end(), [](const Problem& a, const Problem& b) { return a.op < b.op; });
    return out;
  }

 private:
  void advance(size_t k) {
    StreamRun& st = streams_[k];
    while (st.head < st.ops.size()) {
      if (!st.started) {
        st.run_end = st.head + 1;
        while (st.run_end < st.ops.size() && s_.ops[static_cast<size_t>(st.ops[st.run_end])].joined) ++st.run_end;
        for (size_t i = st.head; i < st.run_end; ++i)
          if (deps_left_[static_cast<size_t>(st.ops[i])] > 0) return;
        st.started = true;
        for (size_t i = st.head; i < st.run_end; ++i) start(st.ops[i]);
      }
      for (size_t i = st.head; i < st.run_end; ++i)
        if (!done_[static_cast<size_t>(st.ops[i])]) return;
      st.head = st.run_end;
      st.started = false;
    }
  }

  void start(OpId id) {
    started_[static_cast<size_t>(id)] = true;
    const Op& op = s_.ops[static_cast<size_t>(id)];
    if (is_compute(op.kind)) {
      finish(id);
    } else if (is_p2p(op.kind)) {
      OpId p = m_.partner[static_cast<size_t>(id)];
      if (p >= 0 && started_[static_cast<size_t>(p)]) finish(id), finish(p);
    } else {
      auto c = static_cast<size_t>(m_.call_of[static_cast<size_t>(id)]);
      if (++call_started_[c] == m_.calls[c].size())
        for (OpId member : m_.calls[c]) finish(member);
    }
  }

  void finish(OpId id) {
    done_[static_cast<size_t>(id)] = true;
    work_.push_back(stream_of_[static_cast<size_t>(id)]);
    for (OpId d : dependents_[static_cast<size_t>(id)])
      if (--deps_left_[static_cast<size_t>(d)] == 0) work_.push_back(stream_of_[static_cast<size_t>(d)]);
  }

  std::string why(OpId id, const StreamRun& st) const {
    const Op& op = s_.ops[static_cast<size_t>(id)];
    if (!st.started) {
      for (size_t i = st.head; i < st.run_end; ++i)
        for (OpId d : s_.ops[static_cast<size_t>(st.ops[i])].deps)
          if (!done_[static_cast<size_t>(d)]) return fmt::format("waits for its dependency {}", describe(s_, d));
    }
    if (is_p2p(op.kind)) {
      for (size_t i = st.head; i < st.run_end; ++i) {
        OpId p = m_.partner[static_cast<size_t>(st.ops[i])];
        if (!done_[static_cast<size_t>(st.ops[i])])
          return fmt::format("waits for its partner {}, which never starts", describe(s_, p));
      }
    }
    if (is_collective(op.kind)) {
      for (OpId member : m_.calls[static_cast<size_t>(m_.call_of[static_cast<size_t>(id)])])
        if (!started_[static_cast<size_t>(member)])
          return fmt::format("waits for collective member {}, which never starts", describe(s_, member));
    }
    return "waits on a stuck op";
  }

  const Schedule& s_;
  const CommMatching& m_;
  std::vector<StreamRun> streams_;
  std::vector<size_t> stream_of_;
  std::vector<int> deps_left_;
  std::vector<bool> started_, done_;
  std::vector<size_t> call_started_;
  std::vector<std::vector<OpId>> dependents_;
  std::vector<size_t> work_;
};

}  // namespace

std::vector<Problem> find_deadlocks(const Schedule& s, const CommMatching& m) {
  AbstractRun r(s, m);
  r.run();
  return r.problems();
}

}  // namespace rm::schedule
