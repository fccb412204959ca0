// What bounds the step of a streamed run (stream_report.hpp), gathered as its
// chunks retire instead of from every op at the end: the same transfers as
// bound_by's (a matched send/recv pair; each (sender, receiver) pair of a
// collective call), matched as they retire, each counted once it has ended and
// no transfer still to come can start before it — so every link's sums and
// unions take them in bound_by's order, (start, then the whole Schedule's
// transfer order), and give its figures to the last bit. What depends on the
// critical path (each link's critical seconds, the verdict) waits for the end:
// the run hands over its chain with each p2p link's transfer
// (engine::StreamRun::critical_chain); collective calls are few and kept.
// Held: transfers not yet counted, calls, and per rank the intervals not yet
// swept — what is in flight, not the step.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <queue>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/report/bound_by.hpp"
#include "sim/report/report_core.hpp"
#include "sim/schedule/op_events.hpp"
#include "sim/schedule/p2p_matcher.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"

namespace rm::report {

class StreamBoundBy {
 public:
  // meta: the Schedule's frame (ranks, streams, symmetry); t, m must outlive this.
  StreamBoundBy(const schedule::Schedule& meta, const topology::Topology& t, const cost::CostModel& m);
  // The next retired chunk, in op order (engine::RetiredChunk's fields).
  void add(std::span<const schedule::Op> ops, std::span<const schedule::OpDesc> descs, std::span<const double> start,
           std::span<const double> end, std::span<const schedule::Group> groups, double safe_before);
  // After the last chunk. chain and transfers: the run's critical path (engine::StreamRun::critical_chain).
  BoundBy finish(const CriticalPath& cp, std::span<const schedule::PathLink> chain,
                 std::span<const schedule::PathTransfer> transfers, double step, double step_imbalance);

 private:
  // A transfer waiting to be counted, ordered as bound_by orders them: by start,
  // then p2p before collective, p2p by its send's id, calls by (group, tag, k)
  // (CommMatching's numbering) and pair. A collective call waits as one entry:
  // its transfers share its start and their keys differ in the pair only, so no
  // other transfer falls between them and they are counted together, in pair
  // order (an all-to-all is n^2 transfers: one heap entry, not n^2).
  struct Pending {
    double t0, t1, bytes;  // a call: t1 and bytes are its transfers' own
    int32_t routes;        // a p2p transfer's route set
    int32_t call;          // a call: its index in calls_; p2p: -1
    schedule::Phase phase;
    bool ring;
    int64_t order[3];  // p2p: {0, send id, 0}; call: {1 + group, tag, k}
    bool operator>(const Pending& o) const {
      if (t0 != o.t0) return t0 > o.t0;
      for (int i = 0; i < 3; ++i)
        if (order[i] != o.order[i]) return order[i] > o.order[i];
      return false;
    }
  };
  struct Half {  // a send or recv waiting for its partner
    schedule::OpId id;
    int rank;
    double start, end, bytes;
    schedule::Phase phase;
    bool ring;
  };
  struct Member {
    schedule::OpId id = -1;
    double start = 0, end = 0;
  };
  struct OpenCall {
    std::vector<Member> members;
    size_t filled = 0;
    schedule::Op first;  // member 0's op: the call's shape, phase and ring step
    int64_t bytes = 0;   // and its bytes
  };
  struct OpenCalls {  // calls of one (group, tag) being formed: call k is calls[k - k_lo]
    std::vector<int64_t> next_k;
    int64_t k_lo = 0;
    std::deque<OpenCall> calls;
  };
  struct CallRecord {  // a formed call, for the critical path at the end: its transfers are made again from it
    double t0 = 0;
    schedule::CallShapeKey key;
    int group = -1;
    std::vector<double> ends;  // per member
  };
  // Per rank: the intervals not yet swept, and the sweeps.
  struct RankPhases {
    std::vector<std::pair<core::Interval, uint8_t>> compute, comm;  // with the op's phase
    std::deque<core::Interval> compute_union;                         // merged so far (the last may grow)
    int64_t union_base = 0;                                           // compute_union[0]'s index
    // Read by length_by_pieces(), as bound_by sums a union.
    std::array<core::UnionSweep, schedule::kPhaseCount> phase_compute;
    struct CommSweep {
      bool open = false;
      double lo = 0, hi = 0;
      int64_t j = 0;  // minus_length's cursor into compute_union (global index)
    };
    std::array<CommSweep, schedule::kPhaseCount> phase_comm;
  };

  void pair_up(const schedule::Op& op, int64_t bytes, double start, double end);
  void join_call(const schedule::Op& op, int64_t bytes, double start, double end,
                 std::span<const schedule::Group> groups);
  void form_call(const OpenCall& call, const schedule::Group& g, int64_t group, int64_t tag, int64_t k);
  // Each transfer of a call with bytes: f(pair, route set, t1).
  template <class F>
  void call_transfers(const CallRecord& c, F&& f);
  void count_until(double below);
  void count(const Pending& f);
  void count(int32_t routes, double t0, double t1, double bytes, schedule::Phase phase, bool ring);
  void sweep(double below);
  void close_comm(size_t rank, size_t phase);

  const topology::Topology& t_;
  const cost::CostModel& m_;
  core::LinkRates rates_;
  int ranks_ = 0, replicas_ = 1;
  std::vector<std::vector<signed char>> stream_kind_;  // per rank, per stream: 1 compute, 0 communication
  core::LinkTraffic tr_;  // its routes stay empty: the route sets below, flat, hold what is read of them
  core::CallPairs pairs_;
  std::array<std::array<double, 4>, 2> capped_{};
  // Route sets (core::RouteSets' numbering, kept flat: a context group's
  // all-to-all names a million GPU pairs): per set and replica k, its route's
  // links set_links_[route_begin_[s R + k], route_begin_[s R + k + 1]) and what
  // caps it, class * 4 + slowest kind (kEmpty: no link, a local copy).
  static constexpr uint8_t kEmpty = 255;
  int32_t route_set(int src_rank, int dst_rank, int dst_k);
  core::RouteSetIndex sets_;
  std::vector<int32_t> set_links_;
  std::vector<uint64_t> route_begin_{0};
  std::vector<uint8_t> route_cap_;
  std::vector<char> set_used_;     // per route set: some transfer with bytes named it
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  schedule::P2PMatcher<Half> unmatched_;  // sends and recvs waiting for their partner
  std::map<std::pair<int, int64_t>, OpenCalls> open_calls_;
  std::vector<CallRecord> calls_;
  std::vector<std::vector<int>> group_ranks_;  // of the groups calls were formed on
  std::unordered_map<schedule::OpId, int32_t> call_of_;  // collective op -> calls_
  std::vector<RankPhases> phases_;
  std::array<bool, schedule::kPhaseCount> seen_{};
  core::PhaseFigures figures_;
  int64_t held_ = 0, sweep_at_ = 1 << 20;
};

}  // namespace rm::report
