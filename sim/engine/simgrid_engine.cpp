#include "sim/engine/simgrid_engine.hpp"

#include <sys/wait.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/engine/exec_plan.hpp"
#include "sim/engine/simgrid_wrapper.hpp"
#include "sim/engine/symmetry.hpp"
#include "sim/schedule/schedule_error.hpp"

namespace rm::engine {

namespace {

using schedule::Op;
using schedule::OpId;

// One actor drives the whole schedule as the run driver's backend. SimGrid
// carries only the flows: each transfer (p2p pair or collective plan step) is
// an asynchronous Comm::sendto. Compute ops stay in the driver's own queue,
// ordered by end date, and the next end is SimGrid's alarm (the clock steps to
// it). At each clock step that ends something, the ops ending there are
// handled in the order SimGrid's wait_any handed them out when compute ran as
// executions (see order_step), so the Timeline did not change by a bit.
class SgRun final : public schedule::RunBackend {
 public:
  // reference: run as before compute left SimGrid (sg::Simulation::Mode::wait_any).
  SgRun(const schedule::Schedule& s, const schedule::RunPlan& run, const topology::Topology& t, const cost::CostModel& m,
        bool reference, const FixedDurations* fixed)
      : s_(s), t_(t), m_(m), p_(s, run, m, fixed), st_(run), driver_(run, *this), reference_(reference),
        sim_(reference ? sg::Simulation::Mode::wait_any : sg::Simulation::Mode::alarm) {
    if (s.symmetry.replicas > 1) sym_ = std::make_unique<ReplicaRoutes>(t, m, s.symmetry);
    build_platform();
  }

  OpTimes run() {
    sim_.spawn("driver", 0, [this] { drive(); });
    sim_.run();
    driver_.check_finished(s_);
    return std::move(st_.times);
  }

 private:
  enum class Kind : uint8_t { compute, p2p, xfer };
  struct Started {  // a transfer in flight, by its start number
    Kind kind;
    int64_t index;  // the send op (p2p) or the transfer (xfer)
  };
  struct ComputeEnd {
    double date;
    int64_t seq;
    OpId op;
    bool operator>(const ComputeEnd& o) const { return date != o.date ? date > o.date : seq > o.seq; }
  };
  struct Ended {
    int64_t seq;
    Kind kind;
    int64_t index;  // op (compute, p2p send) or transfer
  };
  const schedule::CommMatching& match() const { return p_.run.match; }

  // Hosts: one per GPU (the driver actor sits on gpu0). Links: one per
  // Topology link, then one loopback per GPU that sends to itself. Routes only
  // for the GPU pairs the schedule uses.
  // One replica for all (symmetry.hpp): each route is folded onto its orbits'
  // representatives, in route order, and a representative crossed by w
  // translates of every flow on it (w = replicas / its orbit's size) gets 1/w
  // of its capacity: sum of rates <= C / w is the full step's sum over the
  // translates <= C, the constraint the analytic engine weights by w.
  void build_platform() {
    for (int g = 0; g < t_.gpus(); ++g) sim_.add_host(fmt::format("gpu{}", g), 1e9);
    if (reference_)  // a host per stream runs its executions, one at a time
      for (size_t k = 0; k < p_.run.streams.size(); ++k) sim_.add_host(fmt::format("stream{}", k), 1e9);
    std::set<std::pair<int, int>> pairs;
    for (const Op& op : s_.ops)
      if (op.kind == schedule::OpKind::send) pairs.insert({gpu(op.rank), gpu(op.peer)});
    // The calls of one group, kind and root move between the same GPU pairs: planned once.
    std::set<std::tuple<int, schedule::OpKind, int>> planned;
    CallShapes shapes;
    for (size_t c = 0; c < match().calls.size(); ++c) {
      const Op& first = s_.ops[static_cast<size_t>(match().calls[c].front())];
      if (!planned.insert({first.group, first.kind, first.peer}).second) continue;
      CallRun run;
      begin_call(s_, p_.run, static_cast<int64_t>(c), run, shapes);
      for (const auto& x : run.plan()) pairs.insert(xfer_gpus(c, run, x));
    }
    std::vector<int32_t> weight(t_.links().size(), 0);  // folded: per representative, replicas / orbit size
    std::vector<std::pair<std::pair<int, int>, std::vector<int>>> routes;
    for (auto [a, b] : pairs) {
      if (a == b || !sym_) {
        routes.push_back({{a, b}, a == b ? std::vector<int>{} : t_.route(a, b).links});
        continue;
      }
      FoldedRoute f;
      if (std::string why = sym_->fold(a, b, f); !why.empty())
        throw schedule::ScheduleError("the data-parallel shortcut is not exact here: " + why);
      for (size_t i = 0; i < f.path.size(); ++i) {
        int32_t& w = weight[static_cast<size_t>(f.path[i])];
        if (w != 0 && w != f.path_weights[i])  // an orbit's size is the orbit's: never seen
          throw std::logic_error(fmt::format("simgrid engine: link {} folded with weights {} and {}",
                                             t_.links()[static_cast<size_t>(f.path[i])].name, w, f.path_weights[i]));
        w = f.path_weights[i];
      }
      routes.push_back({{a, b}, std::move(f.path)});
    }
    for (size_t l = 0; l < t_.links().size(); ++l) {
      const topology::Link& link = t_.links()[l];
      const double rate = m_.link_rate_Bps(link);
      sim_.add_link(link.name, weight[l] > 1 ? rate / weight[l] : rate, m_.link_latency_s(link));
    }
    for (auto& [ab, links] : routes) {
      const auto [a, b] = ab;
      if (a == b) {
        const int l = sim_.add_link(fmt::format("gpu{}-loopback", a), m_.local_copy_rate_Bps(), 0.0, false);
        sim_.add_route(a, a, {l});
      } else {
        sim_.add_route(a, b, links);
      }
    }
  }

  int gpu(int rank) const { return p_.gpu_of_rank[static_cast<size_t>(rank)]; }
  // The GPUs of a planned transfer of call c; for a call over a group spanning
  // replicas, plan member m is member m % fold of replica m / fold (exec_plan.hpp).
  std::pair<int, int> xfer_gpus(size_t c, const CallRun& run, const cost::PlannedTransfer& x) const {
    const auto& ops = match().calls[c];
    auto at = [&](int m) {
      const int g = gpu(s_.ops[static_cast<size_t>(ops[static_cast<size_t>(run.slot(m))])].rank);
      return run.fold > 0 ? sym_->translate(g, m / run.fold) : g;
    };
    return {at(x.src), at(x.dst)};
  }

  void drive() {
    driver_.start();
    if (reference_) {
      while (sim_.activities_in_flight() > 0) {
        const auto it = in_flight_.find(sim_.wait_any());
        const Ended e{it->first, it->second.kind, it->second.index};
        in_flight_.erase(it);
        handle(e);
      }
      return;
    }
    while (sim_.transfers_in_flight() > 0 || !computes_.empty()) {
      sim_.set_alarm(computes_.empty() ? -1.0 : computes_.top().date);
      const std::vector<int64_t>& ended = sim_.wait();
      order_step(ended);
      for (const Ended& e : step_) handle(e);
    }
    sim_.set_alarm(-1.0);
  }

  // The ops ending at this clock step, in the order the engine handled them
  // when compute ran as SimGrid executions and it took one activity at a time
  // from Activity::wait_any over all of them in start order: first the
  // activity SimGrid finished first (its CPU model is updated before its
  // network model, and its action heap is stable: the earliest end date, ties
  // by start), then every other one ended at this step, in start order.
  void order_step(const std::vector<int64_t>& ended) {
    step_.clear();
    while (!computes_.empty() && sim_.due(computes_.top().date)) {
      const ComputeEnd c = computes_.top();
      computes_.pop();
      step_.push_back({c.seq, Kind::compute, c.op});
    }
    for (int64_t seq : ended) {
      const auto it = in_flight_.find(seq);
      step_.push_back({seq, it->second.kind, it->second.index});
      in_flight_.erase(it);
    }
    // step_[0] is the first SimGrid finished: a compute when any ended here,
    // else the first transfer it ended.
    if (step_.size() > 2)
      std::sort(step_.begin() + 1, step_.end(), [](const Ended& a, const Ended& b) { return a.seq < b.seq; });
  }

  void handle(const Ended& e) {
    switch (e.kind) {
      case Kind::compute: finish(e.index); break;
      case Kind::p2p: {
        const OpId partner = match().partner[static_cast<size_t>(e.index)];
        finish(e.index);
        finish(partner);
        break;
      }
      case Kind::xfer: xfer_done(e.index); break;
    }
  }

  void post(OpId id) override { st_.times.start[static_cast<size_t>(id)] = sim_.now(); }

  // The end date SimGrid computed for an execution of compute_seconds x 1e9
  // flops on a 1 GFLOP/s host, in its arithmetic: start + remains / rate, with
  // remains under its work precision (1e-5 x 1e-9) counted as zero.
  void start_compute(OpId id) override {
    const auto i = static_cast<size_t>(id);
    if (reference_) {
      const int64_t seq = seq_++;
      in_flight_.emplace(seq, Started{Kind::compute, id});
      sim_.start_execute(t_.gpus() + p_.run.stream_of[i], p_.compute_s[i] * 1e9, seq);
      return;
    }
    double flops = p_.compute_s[i] * 1e9;
    if (flops < 1e-14) flops = 0.0;
    const double date = sim_.now() + (flops > 0 ? flops / 1e9 : 0.0);
    computes_.push({date, seq_++, id});
  }

  void start_p2p(OpId id, OpId partner) override {
    const Op& op = s_.ops[static_cast<size_t>(id)];
    const Op& send = op.kind == schedule::OpKind::send ? op : s_.ops[static_cast<size_t>(partner)];
    start_transfer(gpu(send.rank), gpu(send.peer), double(s_.desc(send).bytes), Kind::p2p, send.id);
  }

  void start_transfer(int src, int dst, double bytes, Kind kind, int64_t index) {
    const int64_t seq = seq_++;
    in_flight_.emplace(seq, Started{kind, index});
    sim_.start_transfer(src, dst, bytes, seq);
  }

  void start_collective(int64_t c) override {
    CallRun& run = st_.calls[static_cast<size_t>(c)];
    begin_call(s_, p_.run, c, run, st_.shapes);
    const auto& members = match().calls[static_cast<size_t>(c)];
    // Start the ready transfers before finishing members without any (a
    // finish may start other calls).
    const size_t count = run.plan().size();
    for (size_t i = 0; i < count; ++i)
      if (run.deps_left[i] == 0) start_xfer(c, static_cast<int32_t>(i));
    for (size_t i = 0; i < members.size(); ++i)
      if (run.member_left[i] == 0) finish(members[i]);
  }

  void start_xfer(int64_t call, int32_t local) {
    const CallRun& run = st_.calls[static_cast<size_t>(call)];
    const cost::PlannedTransfer& pt = run.plan()[static_cast<size_t>(local)];
    const auto [src, dst] = xfer_gpus(static_cast<size_t>(call), run, pt);
    start_transfer(src, dst, pt.bytes, Kind::xfer, xfer_id(call, local));
  }

  void xfer_done(int64_t x) {
    const int64_t call = xfer_call(x);
    const int32_t local = xfer_local(x);
    CallRun& run = st_.calls[static_cast<size_t>(call)];  // st_.calls never grows: finish leaves it put
    // Start the dependent transfers, then finish the members whose last
    // transfer this was (finishing may start other calls).
    run.release_dependents(local, [&](int32_t d) { start_xfer(call, d); });
    const auto& members = match().calls[static_cast<size_t>(call)];
    const cost::PlannedTransfer& pt = run.plan()[static_cast<size_t>(local)];
    for (int m : {run.slot(pt.src), run.slot(pt.dst)})
      if (--run.member_left[static_cast<size_t>(m)] == 0) finish(members[static_cast<size_t>(m)]);
    run.end_xfer();  // the call's last transfer: what it held is freed
  }

  void finish(OpId id) {
    st_.times.end[static_cast<size_t>(id)] = sim_.now();
    driver_.complete(id);
  }

  const schedule::Schedule& s_;
  const topology::Topology& t_;
  const cost::CostModel& m_;
  ExecPlan p_;
  RunState st_;
  schedule::RunDriver driver_;
  bool reference_;
  sg::Simulation sim_;
  int64_t seq_ = 0;  // start order of every activity, compute or transfer
  std::priority_queue<ComputeEnd, std::vector<ComputeEnd>, std::greater<>> computes_;
  std::unordered_map<int64_t, Started> in_flight_;
  std::vector<Ended> step_;
  std::unique_ptr<ReplicaRoutes> sym_;  // a replica-symmetric Schedule (symmetry.hpp)
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

void child(int fd, const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
           const cost::CostModel& m, bool reference, const FixedDurations* fixed) {
#if defined(__GLIBC__)
  // The heap's free pages are the parent's until written: each first write
  // would copy a 4 KB page (copy-on-write splits huge pages too). Handed back
  // first, they fault in as fresh zero pages instead.
  malloc_trim(0);
#endif
  char status = 'o';
  std::string message;
  OpTimes times;
  try {
    times = SgRun(s, plan, t, m, reference, fixed).run();
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

OpTimes run_in_child(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m, bool reference, const FixedDurations* fixed);

}  // namespace

namespace {

OpTimes run_in_child(const schedule::Schedule& s, const schedule::RunPlan& plan, const topology::Topology& t,
                     const cost::CostModel& m, bool reference, const FixedDurations* fixed) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(fmt::format("simgrid engine: pipe: {}", std::strerror(errno)));
  // Flush stdio first: the child inherits unwritten buffers, and SimGrid's
  // teardown in the child flushes them, printing them twice.
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("simgrid engine: fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], s, plan, t, m, reference, fixed);
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

}  // namespace

}  // namespace rm::engine

// The module's entry point (simgrid_engine.hpp: SimGridCall), looked up by
// simgrid_loader.cpp; C linkage so its name is kSimGridEntry as written.
extern "C" __attribute__((visibility("default"))) void ringmaster_simgrid_run_v1(const rm::engine::SimGridCall& c) {
  *c.out = rm::engine::run_in_child(*c.s, *c.plan, *c.t, *c.m, c.reference, c.fixed_compute_s);
}
