#include "sim/engine/simgrid_engine.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "sim/engine/exec_plan.hpp"
#include "sim/engine/simgrid_wrapper.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::engine {

namespace {

using schedule::Op;
using schedule::OpId;

constexpr double kStreamFlopsPerS = 1e9;  // executions carry seconds x 1e9 "flops"

class SgRun {
 public:
  SgRun(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m)
      : s_(s), t_(t), m_(m), p_(make_exec_plan(s, m)) {
    const size_t n = s.ops.size();
    times_.start.assign(n, -1.0);
    times_.end.assign(n, -1.0);
    launched_.assign(n, false);
    arrived_.assign(p_.match.calls.size(), 0);
    calls_.resize(p_.match.calls.size());
    build_platform();
    conds_.resize(s.ranks.size());
    for (auto& c : conds_) c = std::make_unique<sg::Simulation::Condition>();
  }

  OpTimes run() {
    for (size_t k = 0; k < p_.streams.size(); ++k) {
      const Op& first = s_.ops[static_cast<size_t>(p_.streams[k].front())];
      sim_.spawn(fmt::format("r{}s{}", first.rank, first.stream), gpu_host(first.rank), [this, k] { stream_actor(k); });
    }
    sim_.run();
    check_all_ended(s_, times_.end);
    return std::move(times_);
  }

 private:
  // Hosts: one per GPU, then one per stream. Links: one per Topology link,
  // then one loopback per GPU. Routes only for the GPU pairs the schedule uses.
  void build_platform() {
    for (int g = 0; g < t_.gpus(); ++g) sim_.add_host(fmt::format("gpu{}", g), kStreamFlopsPerS);
    stream_host_base_ = t_.gpus();
    for (size_t k = 0; k < p_.streams.size(); ++k) sim_.add_host(fmt::format("stream{}", k), kStreamFlopsPerS);
    for (const Link& l : t_.links()) sim_.add_link(l.name, m_.link_rate_Bps(l), m_.link_latency_s(l));
    std::set<std::pair<int, int>> pairs;
    for (const Op& op : s_.ops)
      if (op.kind == schedule::OpKind::send) pairs.insert({gpu(op.rank), gpu(op.peer)});
    for (size_t c = 0; c < p_.match.calls.size(); ++c)
      for (const auto& x : plan_call(s_, p_, static_cast<int64_t>(c))) pairs.insert(call_gpus(c, x));
    for (auto [a, b] : pairs) {
      if (a == b) {
        const int l = sim_.add_link(fmt::format("gpu{}-loopback", a), m_.local_copy_rate_Bps(), 0.0, false);
        sim_.add_route(a, a, {l});
      } else {
        sim_.add_route(a, b, t_.route(a, b).links);
      }
    }
  }

  int gpu(int rank) const { return p_.gpu_of_rank[static_cast<size_t>(rank)]; }
  int gpu_host(int rank) const { return gpu(rank); }
  std::pair<int, int> call_gpus(size_t c, const cost::PlannedTransfer& x) const {
    const auto& ops = p_.match.calls[c];
    return {gpu(s_.ops[static_cast<size_t>(ops[static_cast<size_t>(x.src)])].rank),
            gpu(s_.ops[static_cast<size_t>(ops[static_cast<size_t>(x.dst)])].rank)};
  }
  bool done(OpId id) const { return times_.end[static_cast<size_t>(id)] >= 0; }

  void stream_actor(size_t k) {
    const auto& ops = p_.streams[k];
    const int rank = s_.ops[static_cast<size_t>(ops.front())].rank;
    sg::Simulation::Condition& cond = *conds_[static_cast<size_t>(rank)];
    for (size_t head = 0; head < ops.size();) {
      const size_t end = head + static_cast<size_t>(p_.run_length[static_cast<size_t>(ops[head])]);
      cond.wait_until([&] {
        for (size_t i = head; i < end; ++i)
          for (OpId d : s_.ops[static_cast<size_t>(ops[i])].deps)
            if (!done(d)) return false;
        return true;
      });
      const double now = sim_.now();
      for (size_t i = head; i < end; ++i) times_.start[static_cast<size_t>(ops[i])] = now;
      for (size_t i = head; i < end; ++i) start_op(ops[i], k);
      cond.wait_until([&] {
        for (size_t i = head; i < end; ++i)
          if (!done(ops[i])) return false;
        return true;
      });
      head = end;
    }
  }

  void start_op(OpId id, size_t k) {
    const auto i = static_cast<size_t>(id);
    const Op& op = s_.ops[i];
    if (schedule::is_compute(op.kind)) {
      sim_.execute(stream_host_base_ + static_cast<int>(k), p_.compute_s[i] * kStreamFlopsPerS);
      finish(id);
    } else if (schedule::is_p2p(op.kind)) {
      const OpId partner = p_.match.partner[i];
      // Whoever sees both started launches the transfer, once: spawning yields
      // to other actors, so the partner may see both started too.
      if (times_.start[static_cast<size_t>(partner)] < 0) return;
      const Op& send = op.kind == schedule::OpKind::send ? op : s_.ops[static_cast<size_t>(partner)];
      if (launched_[static_cast<size_t>(send.id)]) return;
      launched_[static_cast<size_t>(send.id)] = true;
      const int src = gpu(send.rank), dst = gpu(send.peer);
      const double bytes = double(send.bytes);
      sim_.spawn(fmt::format("p2p{}", send.id), src, [this, src, dst, bytes, id, partner] {
        sim_.transfer(src, dst, bytes);
        finish(id);
        finish(partner);
      });
    } else {
      const int64_t c = p_.match.call_of[i];
      if (++arrived_[static_cast<size_t>(c)] == p_.match.calls[static_cast<size_t>(c)].size()) start_call(c);
    }
  }

  struct CallRun {
    std::vector<cost::PlannedTransfer> plan;
    std::vector<std::vector<int32_t>> dependents;
    std::vector<int32_t> deps_left, member_left;
  };

  void start_call(int64_t c) {
    CallRun& run = calls_[static_cast<size_t>(c)];
    run.plan = plan_call(s_, p_, c);
    const auto& members = p_.match.calls[static_cast<size_t>(c)];
    run.member_left.assign(members.size(), 0);
    run.deps_left.assign(run.plan.size(), 0);
    run.dependents.resize(run.plan.size());
    for (size_t i = 0; i < run.plan.size(); ++i) {
      ++run.member_left[static_cast<size_t>(run.plan[i].src)];
      ++run.member_left[static_cast<size_t>(run.plan[i].dst)];
      for (int32_t d : run.plan[i].deps)
        if (d >= 0) {
          ++run.deps_left[i];
          run.dependents[static_cast<size_t>(d)].push_back(static_cast<int32_t>(i));
        }
    }
    // Collect the ready transfers first: spawning yields, and a transfer that
    // completes meanwhile starts its own dependents.
    std::vector<int32_t> ready;
    for (size_t i = 0; i < run.plan.size(); ++i)
      if (run.deps_left[i] == 0) ready.push_back(static_cast<int32_t>(i));
    for (size_t i = 0; i < members.size(); ++i)
      if (run.member_left[i] == 0) finish(members[i]);
    for (int32_t x : ready) start_transfer(c, x);
  }

  void start_transfer(int64_t c, int32_t x) {
    const auto [src, dst] = call_gpus(static_cast<size_t>(c), calls_[static_cast<size_t>(c)].plan[static_cast<size_t>(x)]);
    sim_.spawn(fmt::format("c{}t{}", c, x), src, [this, c, x, src = src, dst = dst] {
      CallRun& run = calls_[static_cast<size_t>(c)];
      sim_.transfer(src, dst, run.plan[static_cast<size_t>(x)].bytes);
      const auto& members = p_.match.calls[static_cast<size_t>(c)];
      const auto& pt = run.plan[static_cast<size_t>(x)];
      for (int m : {pt.src, pt.dst})
        if (--run.member_left[static_cast<size_t>(m)] == 0) finish(members[static_cast<size_t>(m)]);
      for (int32_t d : run.dependents[static_cast<size_t>(x)])
        if (--run.deps_left[static_cast<size_t>(d)] == 0) start_transfer(c, d);
    });
  }

  void finish(OpId id) {
    times_.end[static_cast<size_t>(id)] = sim_.now();
    conds_[static_cast<size_t>(s_.ops[static_cast<size_t>(id)].rank)]->notify_all();
  }

  const schedule::Schedule& s_;
  const Topology& t_;
  const cost::CostModel& m_;
  ExecPlan p_;
  sg::Simulation sim_;
  int stream_host_base_ = 0;
  OpTimes times_;
  std::vector<bool> launched_;  // per send op: its transfer has been spawned
  std::vector<size_t> arrived_;
  std::vector<CallRun> calls_;
  std::vector<std::unique_ptr<sg::Simulation::Condition>> conds_;
};

// The child's reply: a status byte ('o' ok, 's' schedule error, 'e' other
// error), then the op times, or the error message.
void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t w = ::write(fd, p, size);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(3);
    p += w;
    size -= static_cast<size_t>(w);
  }
}

void child(int fd, const schedule::Schedule& s, const Topology& t, const cost::CostModel& m) {
  char status = 'o';
  std::string message;
  OpTimes times;
  try {
    times = SgRun(s, t, m).run();
  } catch (const schedule::ScheduleError& e) {
    status = 's', message = e.what();
  } catch (const std::exception& e) {
    status = 'e', message = e.what();
  }
  write_all(fd, &status, 1);
  if (status == 'o') {
    write_all(fd, times.start.data(), times.start.size() * sizeof(double));
    write_all(fd, times.end.data(), times.end.size() * sizeof(double));
  } else {
    write_all(fd, message.data(), message.size());
  }
  ::close(fd);
  _exit(0);  // skip SimGrid's and the parent's static destructors
}

std::string read_all(int fd) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

}  // namespace

OpTimes run_simgrid(const schedule::Schedule& s, const Topology& t, const cost::CostModel& m) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(fmt::format("simgrid engine: pipe: {}", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("simgrid engine: fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], s, t, m);
  }
  ::close(fds[1]);
  const std::string reply = read_all(fds[0]);
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {}
  const size_t n = s.ops.size();
  if (!reply.empty() && reply[0] == 's') throw schedule::ScheduleError(reply.substr(1));
  if (!reply.empty() && reply[0] == 'e') throw std::runtime_error("simgrid engine: " + reply.substr(1));
  if (reply.size() != 1 + 2 * n * sizeof(double) || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    throw std::runtime_error(fmt::format("simgrid engine: the simulation process failed (status {})", wstatus));
  OpTimes times;
  times.start.resize(n);
  times.end.resize(n);
  std::memcpy(times.start.data(), reply.data() + 1, n * sizeof(double));
  std::memcpy(times.end.data(), reply.data() + 1 + n * sizeof(double), n * sizeof(double));
  return times;
}

}  // namespace rm::engine
