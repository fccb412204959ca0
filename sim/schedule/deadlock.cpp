#include "sim/schedule/deadlock.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "sim/schedule/run_driver.hpp"

namespace rm::schedule {

namespace {

// Ends every op the moment it starts; the driver does the rest.
class ZeroTime final : public RunBackend {
 public:
  explicit ZeroTime(const RunPlan& p) : p_(p), driver_(p, *this) {}
  RunDriver& driver() { return driver_; }

 private:
  void post(OpId) override {}
  void start_compute(OpId op) override { driver_.complete(op); }
  void start_p2p(OpId op, OpId partner) override { driver_.complete(op), driver_.complete(partner); }
  void start_collective(int64_t call) override {
    for (OpId member : p_.match.calls[static_cast<size_t>(call)]) driver_.complete(member);
  }

  const RunPlan& p_;
  RunDriver driver_;
};

// What the op at a stuck stream's head waits for.
std::string why(const Schedule& s, const RunPlan& p, const RunDriver& d, size_t k) {
  const auto& ops = p.streams[k];
  const size_t head = d.head(k);
  const size_t end = head + static_cast<size_t>(p.run_length[static_cast<size_t>(ops[head])]);
  const Op& op = s.ops[static_cast<size_t>(ops[head])];
  if (!d.run_launched(k)) {
    for (size_t i = head; i < end; ++i)
      for (OpId dep : s.ops[static_cast<size_t>(ops[i])].deps)
        if (!d.done(dep)) return fmt::format("waits for its dependency {}", describe(s, dep));
  }
  if (is_p2p(op.kind)) {
    for (size_t i = head; i < end; ++i)
      if (!d.done(ops[i]))
        return fmt::format("waits for its partner {}, which never starts",
                           describe(s, p.match.partner[static_cast<size_t>(ops[i])]));
  }
  if (is_collective(op.kind)) {
    for (OpId member : p.match.calls[static_cast<size_t>(p.match.call_of[static_cast<size_t>(op.id)])])
      if (member >= 0 && !d.posted(member))
        return fmt::format("waits for collective member {}, which never starts", describe(s, member));
  }
  return "waits on a stuck op";
}

}  // namespace

std::vector<Problem> find_deadlocks(const Schedule& s, const CommMatching& m) { return find_deadlocks(s, CommMatching(m)); }

std::vector<Problem> find_deadlocks(const Schedule& s, CommMatching&& m) {
  const RunPlan plan(s, std::move(m));
  ZeroTime run(plan);
  RunDriver& d = run.driver();
  d.start();
  const int64_t stuck = static_cast<int64_t>(s.ops.size()) - d.ops_done();
  std::vector<Problem> out;
  for (size_t k = 0; k < plan.streams.size(); ++k) {
    if (d.head(k) == plan.streams[k].size()) continue;
    const OpId op = plan.streams[k][d.head(k)];
    out.push_back({ProblemKind::deadlock, op,
                   fmt::format("{}: deadlock ({} ops never run): {}", describe(s, op), stuck, why(s, plan, d, k))});
  }
  std::sort(out.begin(), out.end(), [](const Problem& a, const Problem& b) { return a.op < b.op; });
  return out;
}

}  // namespace rm::schedule
