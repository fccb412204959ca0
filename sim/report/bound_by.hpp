// What bounds a step: link utilisation, compute vs exposed communication per
// phase, imbalance, and a one-line verdict (compute-bound, bound by a link,
// bound by imbalance, latency-bound). Read off any Timeline that joins its
// Schedule on op ids (predicted or measured): each communication op's bytes
// are spread evenly over the interval its transfer can have run in, on the
// links of its route (collectives decomposed as cost::plan_collective
// does), and a link's utilisation is bytes / (effective rate x time) over the
// step, while busy, and per phase. It also says which link kind caps intra-
// and inter-node traffic — where a what-if on another link changes nothing.
// docs/report.md ("Bound by") defines every figure.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cost/cost_model.hpp"
#include "sim/report/critical_path.hpp"
#include "sim/schedule/comm_matching.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/topology/topology.hpp"
#include "traces/timeline.hpp"

namespace rm::report {

// A link's role in the cluster: nvlink, pcie, nic (a NIC's port to the
// fabric, either way) or fabric (switch to switch).
std::string link_kind(const topology::Topology& t, const topology::Link& l);

struct LinkPhaseLoad {
  schedule::Phase phase = schedule::Phase::forward;
  double bytes = 0;
  double busy_s = 0;       // union of the intervals of this phase's transfers on the link
  double utilisation = 0;  // bytes / (rate x busy_s)
};

struct LinkLoad {
  int link = -1;  // id in Topology::links()
  std::string name, kind;
  double rate_GBps = 0;         // effective: bandwidth x the class's efficiency (CostModel::link_rate_Bps)
  double bytes = 0;             // carried over the step
  double busy_s = 0;            // union of the intervals of the transfers that cross it
  double utilisation = 0;       // bytes / (rate x step time)
  double busy_utilisation = 0;  // bytes / (rate x busy_s): how full it runs while in use
  double critical_s = 0;        // seconds some transfer of a critical-path op crosses it (union)
  std::vector<LinkPhaseLoad> phases;  // phases that used it, in Phase order
  // The same over the transfers of ring-step ops (step >= 0): the ring's own K/V and dK/dV traffic.
  double ring_bytes = 0, ring_busy_s = 0, ring_utilisation = 0;
};

// Every link of one kind that carried bytes, together.
struct KindLoad {
  std::string kind;
  int links = 0;                    // that carried bytes
  double bytes = 0;                 // summed over them
  std::string busiest;              // the one with the highest utilisation (first in link order on ties)
  double utilisation = 0;           // the busiest one's, over the step
  double busy_utilisation = 0;      // the busiest one's, while busy
};

// Which link kind caps one class of traffic (intra- or inter-node): per
// transfer, the route's slowest effective link; bytes summed per kind.
struct TrafficKind {
  std::string kind;
  std::string link;             // its busiest link among these routes (highest utilisation)
  double rate_GBps = 0;         // that link's effective rate
  double utilisation = 0;       // that link's, over the step
  double busy_utilisation = 0;  // that link's, while busy
  double ring_utilisation = 0;  // that link's, during the ring steps (0 when it carries none)
  double capped_share = 0;      // fraction of the class's bytes whose route this kind caps
  bool bottleneck = false;      // the kind that caps most of the bytes
  // Its busiest link runs at least kSaturatedUtilisation full while busy: faster
  // than the cap, but shared by enough transfers to hold them back as well.
  bool saturated = false;
};
struct TrafficCap {
  bool inter_node = false;
  double bytes = 0;
  std::string capped_by;     // the bottleneck kind
  double capped_share = 0;   // fraction of the bytes whose route it caps
  std::vector<TrafficKind> kinds;  // every kind on these routes, bottleneck first, then by name
};

// Per phase, over ranks: compute = union of the phase's compute events;
// exposed comm = time its communication events run while no compute stream of
// the rank is busy. critical_*: the critical path's seconds on the phase's ops.
struct PhaseBound {
  schedule::Phase phase = schedule::Phase::forward;
  double compute_mean_s = 0, compute_max_s = 0;
  double exposed_comm_mean_s = 0, exposed_comm_max_s = 0;
  double critical_compute_s = 0, critical_comm_s = 0;
};

enum class BoundKind { compute, link, imbalance, latency, empty };
std::string_view to_string(BoundKind k);

struct BoundBy {
  BoundKind kind = BoundKind::empty;
  std::string verdict;          // one line
  std::vector<LinkLoad> links;  // every link that carried bytes, busiest (utilisation) first
  int bottleneck = -1;          // index into links when kind == link or latency; else -1
  std::vector<KindLoad> kinds;  // by kind name: nic, nvlink, pcie, fabric as they occur
  std::vector<TrafficCap> traffic;  // intra-node then inter-node, those that carried bytes
  std::vector<PhaseBound> phases;   // phases with events, in Phase order
  double critical_length_s = 0;     // the critical path's length the verdict read
  double attention_critical_s = 0;  // attention seconds on the critical path
  double imbalance_lost_s = 0;      // of which the imbalance costs: attention x (1 - 1 / step_measured)
  std::vector<std::string> notes;   // sentences: what caps each traffic class, what is not the bottleneck
};

// Thresholds of the verdict (docs/report.md): communication holds the
// critical path when it takes more of it than compute; a link bounds it when
// it runs at least kLinkBoundUtilisation full while busy (else latency-bound);
// imbalance bounds a compute-held path when it costs kImbalanceBoundShare of it.
inline constexpr double kLinkBoundUtilisation = 0.5;
inline constexpr double kImbalanceBoundShare = 0.10;
// A faster kind on the same routes "is not the bottleneck" only below this load while busy.
inline constexpr double kSaturatedUtilisation = 0.90;

// cp and step_imbalance (Imbalance::step_measured) come from the step report
// of the same Schedule and Timeline; t and m are what the Timeline ran on.
// match: s's communication matching when the caller has it (RunPlan::match),
// else computed here.
// A replica-symmetric Schedule (the data-parallel shortcut, schedule.hpp
// ReplicaSymmetry) holds replica 0 only: its figures are the whole step's,
// each transfer counted with its translates in every replica (GPU + k x
// ranks_per_replica), a collective over a group spanning replicas planned for
// all its members as the engines plan it (cost::plan_collective of its shape key).
BoundBy bound_by(const schedule::Schedule& s, const traces::Timeline& tl, const topology::Topology& t,
                 const cost::CostModel& m, const CriticalPath& cp, double step_imbalance,
                 const schedule::CommMatching* match = nullptr);

// Keys: kind, verdict, brief, bottleneck (a link object or null), links [{name,
// kind, rate_GBps, bytes, busy_s, utilisation, busy_utilisation, critical_s,
// phases [{phase, bytes, busy_s, utilisation}], ring_steps {bytes, busy_s,
// utilisation}}] (the kMaxJsonLinks busiest),
// links_total, link_kinds [{kind, links, bytes, busiest, utilisation,
// busy_utilisation}], traffic [...], phases [...], imbalance {...}, notes [...].
inline constexpr size_t kMaxJsonLinks = 16;
nlohmann::json to_json(const BoundBy& b);

// One short cell for tables and CSV rows (sweep, plan): "compute", "link pcie
// n0/nic0->n0/gpu0 80%" (kind, link, utilisation while busy), "imbalance 46%"
// (share of the step lost), "latency", "empty".
std::string brief(const BoundBy& b);

// The text report's section: the verdict, the notes, the busiest links and the per-phase table.
std::string to_text(const BoundBy& b, double step_time_s);

}  // namespace rm::report
