#include "sim/schedule/validate.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/deadlock.hpp"
#include "sim/schedule/schedule_error.hpp"
#include "sim/schedule/topo_order.hpp"

namespace rm::schedule {

namespace {

class Checker {
 public:
  explicit Checker(const Schedule& s) : s_(s) {}

  std::vector<Problem> run() {
    check_ranks_and_groups();
    check_ops();
    if (!out_.empty()) return out_;  // matching needs sound ids, ranks and groups
    const CommMatching m = match_comms(s_);
    check_p2p(m);
    check_collectives(m);
    if (!out_.empty()) return out_;
    if (auto cycle = find_cycle(s_)) {
      std::string chain;
      for (size_t i = 0; i < std::min<size_t>(cycle->size(), 8); ++i) chain += fmt::format("{} -> ", (*cycle)[i]);
      chain += cycle->size() > 8 ? "... -> " : "";
      add(ProblemKind::cycle, cycle->front(),
          fmt::format("is on a dependency cycle ({}{}; a -> b: a needs b, by dependency or stream order)", chain,
                      cycle->front()));
      return out_;
    }
    auto dl = find_deadlocks(s_, m);
    out_.insert(out_.end(), dl.begin(), dl.end());
    return out_;
  }

 private:
  void add(ProblemKind k, OpId op, const std::string& what) {
    out_.push_back({k, op, fmt::format("{}: {}", describe(s_, op), what)});
  }
  void add_plain(ProblemKind k, const std::string& what) { out_.push_back({k, -1, what}); }

  bool rank_ok(int r) const { return r >= 0 && r < static_cast<int>(s_.ranks.size()); }
  bool group_ok(int g) const { return g >= 0 && g < static_cast<int>(s_.groups.size()); }
  bool in_group(int g, int r) const {
    const auto& m = s_.groups[static_cast<size_t>(g)].ranks;
    return std::find(m.begin(), m.end(), r) != m.end();
  }

  void check_ranks_and_groups() {
    for (size_t i = 0; i < s_.ranks.size(); ++i) {
      const Rank& r = s_.ranks[i];
      if (r.id != static_cast<int>(i)) add_plain(ProblemKind::bad_id, fmt::format("rank at position {} has id {}", i, r.id));
      std::set<std::string> names;
      for (size_t k = 0; k < r.streams.size(); ++k) {
        if (r.streams[k].id != static_cast<int>(k))
          add_plain(ProblemKind::bad_id, fmt::format("rank {}: stream at position {} has id {}", i, k, r.streams[k].id));
        if (!names.insert(r.streams[k].name).second)
          add_plain(ProblemKind::bad_stream, fmt::format("rank {}: two streams named '{}'", i, r.streams[k].name));
      }
    }
    for (size_t g = 0; g < s_.groups.size(); ++g) {
      const Group& grp = s_.groups[g];
      if (grp.id != static_cast<int>(g)) add_plain(ProblemKind::bad_id, fmt::format("group at position {} has id {}", g, grp.id));
      if (grp.ranks.empty()) add_plain(ProblemKind::bad_group, fmt::format("group {} has no members", g));
      std::set<int> seen;
      for (int r : grp.ranks) {
        if (!rank_ok(r)) add_plain(ProblemKind::bad_rank, fmt::format("group {} names unknown rank {}", g, r));
        if (!seen.insert(r).second) add_plain(ProblemKind::bad_group, fmt::format("group {} lists rank {} twice", g, r));
      }
    }
  }

  void check_ops() {
    std::vector<bool> seen_id(s_.ops.size(), false);
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      const Op& op = s_.ops[i];
      if (op.id != static_cast<OpId>(i)) {
        bool dup = op.id >= 0 && op.id < static_cast<OpId>(s_.ops.size()) && seen_id[static_cast<size_t>(op.id)];
        add_plain(ProblemKind::bad_id, fmt::format("op {}: {} (found at position {}; ids must equal positions)", op.id,
                                                   dup ? "duplicate id" : "id out of place", i));
        continue;
      }
      seen_id[i] = true;
      if (!rank_ok(op.rank)) {
        add(ProblemKind::bad_rank, op.id, fmt::format("unknown rank {}", op.rank));
        continue;
      }
      if (!s_.find_stream(op.rank, op.stream)) add(ProblemKind::bad_stream, op.id, fmt::format("unknown stream {} on rank {}", op.stream, op.rank));
      check_fields(op);
      check_deps(op);
    }
    check_joins();
  }

  void check_fields(const Op& op) {
    if (op.layer < -1 || op.step < -1) add(ProblemKind::bad_field, op.id, "layer and step must be >= -1");
    if (op.bytes < 0 || op.flops < 0 || op.blocks < 0 || op.tokens < 0)
      add(ProblemKind::bad_field, op.id, "costs must be >= 0");
    if (is_compute(op.kind)) {
      if (op.peer != -1 || op.group != -1) add(ProblemKind::bad_field, op.id, "a compute op has no peer or group");
    } else if (is_p2p(op.kind)) {
      if (!rank_ok(op.peer) || op.peer == op.rank)
        add(ProblemKind::bad_rank, op.id, fmt::format("peer {} is not another known rank", op.peer));
      if (op.group != -1) add(ProblemKind::bad_field, op.id, "a send/recv has no group");
    } else {
      if (!group_ok(op.group)) {
        add(ProblemKind::bad_group, op.id, fmt::format("unknown group {}", op.group));
      } else if (!in_group(op.group, op.rank)) {
        add(ProblemKind::bad_group, op.id, fmt::format("rank {} is not a member of group {}", op.rank, op.group));
      } else if (op.kind == OpKind::broadcast ? !in_group(op.group, op.peer) : op.peer != -1) {
        add(ProblemKind::bad_field, op.id,
            op.kind == OpKind::broadcast ? fmt::format("broadcast root {} is not in group {}", op.peer, op.group)
                                         : std::string("only a broadcast has a peer (its root)"));
      }
    }
  }

  void check_deps(const Op& op) {
    for (OpId d : op.deps) {
      if (d < 0 || d >= static_cast<OpId>(s_.ops.size())) {
        add(ProblemKind::dangling_dep, op.id, fmt::format("depends on op {}, which does not exist", d));
      } else if (s_.ops[static_cast<size_t>(d)].rank != op.rank) {
        add(ProblemKind::cross_rank_dep, op.id,
            fmt::format("depends on {} on another rank (ranks meet only through send/recv and collectives)",
                        describe(s_, d)));
      }
    }
  }

  void check_joins() {
    std::map<std::pair<int, int>, const Op*> last;
    for (const Op& op : s_.ops) {
      const Op*& prev = last[{op.rank, op.stream}];
      if (op.joined && (!is_p2p(op.kind) || !prev || !is_p2p(prev->kind)))
        add(ProblemKind::bad_join, op.id, "is joined, but it and the previous op of its stream are not both send/recv");
      prev = &op;
    }
  }

  void check_p2p(const CommMatching& m) {
    for (const Op& op : s_.ops) {
      if (!is_p2p(op.kind)) continue;
      OpId p = m.partner[static_cast<size_t>(op.id)];
      bool is_send = op.kind == OpKind::send;
      if (p < 0) {
        add(ProblemKind::unmatched_p2p, op.id,
            fmt::format("{} {} rank {} (tag {}, {} bytes) has no matching {} on rank {}", is_send ? "send" : "recv",
                        is_send ? "to" : "from", op.peer, op.tag, op.bytes, is_send ? "recv" : "send", op.peer));
      } else if (is_send && s_.ops[static_cast<size_t>(p)].bytes != op.bytes) {
        add(ProblemKind::unmatched_p2p, op.id,
            fmt::format("sends {} bytes but its matching recv, op {}, expects {}", op.bytes, p,
                        s_.ops[static_cast<size_t>(p)].bytes));
      }
    }
  }

  void check_collectives(const CommMatching& m) {
    for (const auto& call : m.calls) {
      auto present = std::find_if(call.begin(), call.end(), [](OpId o) { return o >= 0; });
      const Op& first = s_.ops[static_cast<size_t>(*present)];
      const Group& g = s_.groups[static_cast<size_t>(first.group)];
      for (size_t i = 0; i < call.size(); ++i) {
        if (call[i] < 0) {
          add(ProblemKind::bad_collective, first.id,
              fmt::format("{} on group {} (tag {}): member rank {} has no matching op", to_string(first.kind), g.id,
                          first.tag, g.ranks[i]));
          continue;
        }
        const Op& op = s_.ops[static_cast<size_t>(call[i])];
        if (op.kind != first.kind || op.bytes != first.bytes || op.peer != first.peer)
          add(ProblemKind::bad_collective, op.id,
              fmt::format("is matched with {} but they differ in kind, bytes or root", describe(s_, first.id)));
      }
    }
  }

  const Schedule& s_;
  std::vector<Problem> out_;
};

}  // namespace

std::vector<Problem> check(const Schedule& s) { return Checker(s).run(); }

void validate(const Schedule& s, const std::string& context) {
  auto problems = check(s);
  if (problems.empty()) return;
  std::string more = problems.size() > 1 ? fmt::format(" (and {} more problems)", problems.size() - 1) : "";
  throw ScheduleError(context.empty() ? problems.front().message + more
                                      : fmt::format("{}: {}{}", context, problems.front().message, more));
}

}  // namespace rm::schedule
