#include "sim/generate/footprint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"
#include "sim/generate/generate.hpp"
#include "sim/placement/device_map.hpp"
#include "sim/placement/work_cache.hpp"
#include "sim/sparsity/tile_cost.hpp"

namespace rm::generate {

namespace {

bool top_p(const Experiment& e) { return e.workload.pattern.is_object() && e.workload.pattern.contains("top_p"); }

// generate/ring_emitter.cpp: one group's ring, forward or backward.
int64_t ring_ops(RingShape r, int64_t cp, bool backward) {
  const int64_t O = r.O, I = r.I, K = O * I;
  int64_t n = (O - 1) * 2 * cp      // outer K/V shifts (send + recv per rank)
              + O * (I - 1) * 2 * cp  // inner K/V shifts
              + K * cp                // attention computes
              + (K - 1) * cp;         // merges
  if (backward) {
    if (I > 1) n += K * 2 * cp;  // dK/dV with their block, after every step
    if (O > 1) n += (O - 1) * cp + O * 2 * cp;  // outer additions, outer dK/dV shifts
  }
  return n;
}

// generate/index_building.cpp: one group's index building (a forward or a recomputation).
int64_t index_ops(int64_t cp, bool topp) {
  const int64_t many = cp > 1 ? 1 : 0;
  int64_t n = many * cp;                           // broadcast of the last queries
  n += cp;                                         // QK^T
  if (topp) n += cp + many * cp + cp + many * cp;  // max, gather, exp+sum, gather
  n += cp;                                         // column sums
  n += many * 2 * (cp - 1) + 1 + many * cp;        // gather to the root, top-k, broadcast (verticals)
  n += cp;                                         // diagonal sums
  n += many * 2 * (cp - 1) + 1 + many * cp;        // the same for the slashes
  n += cp + cp;                                    // block mask, sort
  return n;
}

struct Counter {
  const Experiment& e;
  int64_t world = e.parallel.world();
  bool dynamic = dynamic_patterns(e), topp = top_p(e);
  bool shuffles = e.parallel.cp > 1 && e.parallel.shuffle == ShuffleMode::per_call &&
                  e.parallel.partition != Partition::contiguous;
  bool recomputes = e.scope == Scope::layer || e.scope == Scope::step;
  bool split = e.parallel.tp > 1;  // tensor parallelism's all-gathers and reduce-scatters
  std::vector<RingShape> shapes;  // per (d, h, t)

  explicit Counter(const Experiment& x) : e(x) {
    for (int d = 0; d < e.parallel.dp; ++d)
      for (int h = 0; h < e.parallel.hp; ++h)
        for (int t = 0; t < e.parallel.tp; ++t) shapes.push_back(ring_shape(e, d, h, t));
  }

  // generate/attention.cpp: one attention call on every rank.
  int64_t attention(bool backward, bool after_selective) const {
    const int64_t cp = e.parallel.cp;
    int64_t n = 0;
    if (e.parallel.hp > 1) n += 2 * world;  // head all-to-all in and out
    if (shuffles) {
      const int64_t in = !backward ? 2 : (after_selective ? 3 : 1), out = !backward ? 1 : 2;
      n += (in + out) * world;  // one all-to-all per tensor, every rank in one shuffle group
    }
    const int64_t groups = int64_t(e.parallel.dp) * e.parallel.hp * e.parallel.tp;  // context groups
    if (dynamic) n += backward ? world : groups * index_ops(cp, topp);
    for (const RingShape& s : shapes) n += ring_ops(s, cp, backward);
    return n;
  }
  // generate/decoder_layer.cpp: 7 ops per rank each way, and with tp > 1 two all-gathers
  // and two reduce-scatters (backward: two more all-gathers, the inputs gathered again).
  int64_t dense(bool backward) const { return (7 + (split ? (backward ? 6 : 4) : 0)) * world; }
  int64_t layer_forward(bool with_attention) const {
    return dense(false) + (with_attention ? attention(false, false) : 0);
  }
  int64_t layer_backward() const {
    const bool selective = recomputes && e.parallel.checkpoint == Checkpoint::selective;
    return dense(true) + attention(true, selective);
  }
  int64_t layer() const {
    const Checkpoint ck = e.parallel.checkpoint;
    return layer_forward(true) + (ck != Checkpoint::none ? layer_forward(ck == Checkpoint::full) : 0) + layer_backward();
  }
  // generate/generate.cpp: training_step.
  int64_t step() const {
    const int64_t L = e.model.layers;
    const int zero = e.parallel.zero_stage;
    const bool collectives = e.parallel.replicas() > 1;
    int64_t n = L * layer();
    n += 9 * world;  // embedding, final norm, LM head, loss, their backward, embedding grad, optimizer
    if (split) n += 4 * world;  // the embedding's and LM head's tensor-parallel collectives
    if (collectives) {
      if (zero == 3) n += (1 + 2 * L) * world;       // parameter gathers
      n += (L + 1) * world;                          // gradient reductions
      if (zero == 1 || zero == 2) n += (L + 1) * world;  // updated shards back
    }
    return n;
  }
  int64_t count() const {
    switch (e.scope) {
      case Scope::attention_fwd: return attention(false, false);
      case Scope::attention_fwd_bwd: return attention(false, false) + attention(true, false);
      case Scope::layer: return layer();
      case Scope::step: return step();
    }
    return step();
  }
};

// Per-op and per-rank bytes of a run at its peak, upper bounds calibrated on
// peak RSS (docs/generators.md, "Memory estimate"): measured 247 bytes per op
// for `schedule` and 591 for `simulate` (the slope of peak RSS from 0.59M to
// 2.37M ops), here with ~30% to spare. A simulation's per-op and per-rank bytes
// and the base are schedule_footprint.hpp's (one owner: a Schedule file is
// checked against them too).
constexpr int64_t kScheduleBytesPerOp = 320;
using schedule::kBaseBytes;
using schedule::kBytesPerRank;
using schedule::kSimulateBytesPerOp;
// The Topology is ~1 KB per GPU (3.7 MB at 4,096 GPUs, docs/topology.md) and keeps
// a route only for each GPU pair asked for (~92 bytes, plus the analytic engine's
// copy of the pair): at most one pair per op, and never more than every pair.
constexpr int64_t kTopologyBytesPerGpu = 1024;
constexpr int64_t kRouteBytesPerGpuPair = 192;
int64_t topology_bytes(const Experiment& e, int64_t ops) {
  const int64_t g = e.cluster.gpus();
  return g * kTopologyBytesPerGpu + std::min(g * g, ops) * kRouteBytesPerGpuPair;
}

// The attention work the generator reads: per distinct head pattern a cp x cp
// table of pair costs (placement::WorkCache), per (layer, head rank, tensor rank) their sums.
// capped: the per-pattern matrices that head_rank_pairs keeps stay under the work
// cache's budget (placement::WorkCache::matrix_budget); the step generator's path.
int64_t pair_cost_bytes(const Experiment& e, bool every_layer, bool capped = false) {
  const int64_t cp = e.parallel.cp, pairs = cp * cp * int64_t(sizeof(sparsity::TileCost));
  const int64_t layers = every_layer ? e.model.layers : 1;
  const std::string kind = e.workload.pattern.is_object() ? e.workload.pattern.value("kind", "") : "";
  const bool one_pattern = kind == "dense_causal" || kind == "dense_full" || kind == "sliding_window" || kind == "a_shape";
  const int64_t patterns = one_pattern ? 1 : layers * e.model.heads;
  const int64_t kept = capped ? std::min(patterns * pairs, placement::WorkCache::kDefaultMatrixBudget + pairs)
                               : patterns * pairs;
  return kept + layers * e.parallel.hp * e.parallel.tp * pairs;
}

// With the shortcut the engine plans each collective over a group spanning replicas
// for all its members but keeps replica 0's transfers: n (ring stages) per call and
// group, n the group's members in replica 0 (~80 bytes a transfer: plan, counters,
// dependents). Counted as if every call were held to the end of the run: an upper
// bound, loose since the engines free a call's counters at its last transfer and keep
// only one plan per distinct shape (measured ~2.8x over on a 4,096-GPU point, docs/planner.md).
constexpr int64_t kTransferBytes = 80;
int64_t spanning_transfers(const Experiment& e) {
  const Parallel& p = e.parallel;
  if (e.scope != Scope::step || p.replicas() < 2) return 0;
  const int64_t L = e.model.layers, N = p.world() / p.tp, n = N / p.dp;
  const int64_t ring = n * (N - 1);  // all_gather, reduce_scatter; all_reduce twice that
  int64_t calls = (L + 1) * (p.zero_stage == 0 ? 2 : 1);  // gradient reductions
  if (p.zero_stage == 3) calls += 1 + 2 * L;               // parameter gathers
  if (p.zero_stage == 1 || p.zero_stage == 2) calls += L + 1;  // updated shards back
  return calls * ring * p.tp;
}

}  // namespace

int64_t count_step_ops(const Experiment& e) { return Counter(e).count(); }
int64_t count_replica_ops(const Experiment& e) { return count_step_ops(e) / e.parallel.dp; }

Footprint estimate_footprint(const Experiment& e, RunKind kind, bool one_replica) {
  Footprint f;
  f.ops = one_replica ? count_replica_ops(e) : count_step_ops(e);
  const int64_t ranks = one_replica ? e.parallel.world() / e.parallel.dp : e.parallel.world();
  const int64_t per_op = kind == RunKind::schedule ? kScheduleBytesPerOp : kSimulateBytesPerOp;
  f.bytes = kBaseBytes + f.ops * per_op + ranks * kBytesPerRank +
            pair_cost_bytes(e, e.scope == Scope::step) + topology_bytes(e, f.ops);
  if (one_replica) f.bytes += spanning_transfers(e) * kTransferBytes;
  return f;
}

// A streamed run (docs/engines.md, "Streaming") holds the chunks in flight: with
// layer chunks a layer's forward or its backward (with the recomputation), and the
// engine asks for the next chunk when the newest starts to end, so the window is
// counted as two whole layers; with ring-step chunks (ring_step_cuts_apply) the
// layer's ops outside its rings twice, plus kStreamRingSteps steps of its largest
// ring. Per op: the Op, the engine's per-op arrays and dependents, the report's
// intervals until they are swept (~250 bytes), with growth slack; docs/engines.md
// has the measured figures.
constexpr int64_t kStreamBytesPerOp = 480;
// Its bound-by (report/stream_bound_by.hpp) keeps the route of every GPU pair a
// transfer used, as does the Topology: a rank exchanges with its context, head
// and tensor group (all-to-alls), its data-parallel group and a few ring peers.
// Measured ~200-250 bytes a pair (with the data-parallel shortcut at dp = 4: a
// cp = 512 layer's 1.05M pairs +200 MB of peak RSS, a cp = 1,024 layer's 4.2M +1.0 GB).
constexpr int64_t kStreamRouteBytes = 320;
int64_t stream_route_bytes(const Experiment& e) {
  const Parallel& p = e.parallel;
  const int64_t g = p.world(), pairs = std::min(g * g, g * (p.cp * p.hp * p.tp + p.dp + 8));
  return pairs * kStreamRouteBytes;
}
constexpr int64_t kStreamRingSteps = 32;  // 20 measured in flight at cp = 1,024 (docs/engines.md)

Footprint estimate_stream_footprint(const Experiment& e, bool one_replica) {
  const Counter c(e);
  const int64_t dp = one_replica ? e.parallel.dp : 1;
  const int64_t ranks = e.parallel.world() / dp;
  const bool per_layer = e.scope == Scope::step || e.scope == Scope::layer;
  const int64_t layer = per_layer ? c.layer() : c.count();
  Footprint f;
  if (ring_step_cuts_apply(e, one_replica ? Replicas::one : Replicas::all)) {
    // One context group: the layer's ops outside its rings, and a ring step's ops.
    int64_t ring_f = 0, ring_b = 0;
    for (const RingShape& sh : c.shapes) ring_f += ring_ops(sh, e.parallel.cp, false), ring_b += ring_ops(sh, e.parallel.cp, true);
    const bool recompute_ring = per_layer && e.parallel.checkpoint == Checkpoint::full;
    const bool backward = e.scope != Scope::attention_fwd;
    const int64_t rings = ring_f * (recompute_ring ? 2 : 1) + (backward ? ring_b : 0);
    const int64_t K = c.shapes.empty() ? 1 : c.shapes.front().O * c.shapes.front().I;
    const int64_t outside = std::max<int64_t>(layer - rings, 0) / dp;
    f.ops = 2 * outside + kStreamRingSteps * ((std::max(ring_f, ring_b) / dp + K - 1) / K);
    // Queued ahead by a generator on its own thread, and retired for the report's.
    f.ops += 2 * std::max(kStreamQueueOps, outside);
  } else {
    f.ops = 2 * layer / dp;
    f.ops += 2 * std::max(kStreamQueueOps, layer / dp);  // the generator's queue and the report's
  }
  f.ops = std::min(f.ops, c.count() / dp);  // never more than the step
  // The report's forward-attention rows: per (layer, ring step) a planned and a measured figure per rank.
  const int64_t rows = int64_t(e.scope == Scope::step ? e.model.layers : 1) * e.parallel.cp;
  f.bytes = kBaseBytes + f.ops * kStreamBytesPerOp + ranks * kBytesPerRank + pair_cost_bytes(e, e.scope == Scope::step, true) +
            topology_bytes(e, f.ops) + rows * ranks * 2 * int64_t(sizeof(double)) + stream_route_bytes(e);
  if (one_replica && e.scope == Scope::step) {
    // Calls in flight over groups spanning replicas: a few at once, not every call of the step.
    const int64_t calls = (e.model.layers + 1) * (e.parallel.zero_stage == 0 ? 2 : 1);
    f.bytes += spanning_transfers(e) / std::max<int64_t>(calls, 1) * 4 * kTransferBytes;
  }
  return f;
}

Footprint estimate_imbalance_footprint(const Experiment& e, int partitions) {
  Footprint f;
  f.bytes = kBaseBytes + int64_t(partitions) * pair_cost_bytes(e, true) + topology_bytes(e, 0);
  return f;
}

namespace {
int64_t read_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return -1;
  try {
    return std::stoll(s);
  } catch (...) {
    return -1;
  }
}
int64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key;
    int64_t kb = 0;
    if (ss >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}
}  // namespace

int64_t machine_memory_bytes() {
  if (const char* o = std::getenv("RINGMASTER_MEMORY_BYTES"); o && *o) {
    // Digits with an optional k/M/G, above zero: "-5" or "5x" would be read as a size that is none.
    const std::string bad =
        fmt::format("RINGMASTER_MEMORY_BYTES: expected a positive number of bytes like 68719476736 or 64G, got \"{}\"", o);
    int64_t bytes = 0;
    try {
      bytes = parse_size_text(o, "RINGMASTER_MEMORY_BYTES");
    } catch (const ConfigError&) {
      throw ConfigError(bad);
    }
    if (bytes <= 0) throw ConfigError(bad);
    return bytes;
  }
  int64_t limit = read_number("/sys/fs/cgroup/memory.max");
  if (limit < 0) limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  const int64_t avail = mem_available();
  const int64_t physical = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
  int64_t have = avail > 0 ? avail : physical;
  if (limit > 0 && limit < physical) have = std::min(have, limit);  // v1 reports "no limit" as a huge number
  return have;
}

void check_fits(const Footprint& f, const std::string& what) { check_fits(f, what, machine_memory_bytes()); }

void check_fits(const Footprint& f, const std::string& what, int64_t have) {
  if (f.bytes <= have) return;
  const std::string ops = f.ops > 0 ? fmt::format("{} ops", f.ops) : "pair-cost tables";
  throw ConfigError(fmt::format("{} needs ~{:.1f} GB ({}), this machine has {:.1f} GB (set RINGMASTER_MEMORY_BYTES "
                                "to override)",
                                what, double(f.bytes) / 1e9, ops, double(have) / 1e9));
}

namespace {

// ring_shape's answer in `shape`, or its refusal (then `shape` is left as it was).
std::string ring_shape_or_refusal(const Experiment& e, const placement::DeviceMap& map, int d, int h, int t,
                                  RingShape& shape) {
  const Parallel& p = e.parallel;
  if (p.cp == 1) {
    shape = {1, 1};
    return "";
  }
  switch (p.ring) {
    case RingKind::ring: shape = {1, p.cp}; return "";
    case RingKind::double_ring:
      if (p.window < 1 || p.cp % p.window != 0)
        return fmt::format("{}: $.parallel.window: expected a divisor of cp ({}), got {}", e.source, p.cp, p.window);
      shape = {p.cp / p.window, p.window};
      return "";
    case RingKind::hierarchical: {
      std::map<int, int64_t> by_node;
      for (int g : map.context_group(d, h, t)) ++by_node[g / e.cluster.gpus_per_node];
      const int64_t inner = by_node.begin()->second;
      for (const auto& [node, n] : by_node)
        if (n != inner) return fmt::format("{}: $.parallel.ring: hierarchical needs as many context ranks on every node", e.source);
      shape = {int64_t(by_node.size()), inner};
      return "";
    }
  }
  shape = {1, p.cp};
  return "";
}

}  // namespace

RingShape ring_shape(const Experiment& e, int d, int h, int t) {
  RingShape shape;
  const std::string why = ring_shape_or_refusal(e, placement::DeviceMap(e.parallel), d, h, t, shape);
  if (!why.empty()) throw ConfigError(why);
  return shape;
}

std::string structure_refusal(const Experiment& e) {
  const Parallel& p = e.parallel;
  const placement::DeviceMap map(p);
  RingShape shape;
  // Only a hierarchical ring's shape depends on the group: the others are checked once.
  if (p.cp == 1 || p.ring != RingKind::hierarchical) return ring_shape_or_refusal(e, map, 0, 0, 0, shape);
  for (int d = 0; d < p.dp; ++d)
    for (int h = 0; h < p.hp; ++h)
      for (int t = 0; t < p.tp; ++t)
        if (std::string why = ring_shape_or_refusal(e, map, d, h, t, shape); !why.empty()) return why;
  return "";
}

bool dynamic_patterns(const Experiment& e) {
  const auto& p = e.workload.pattern;
  if (!p.is_object()) return false;
  auto it = p.find("dynamic");
  return it != p.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace rm::generate
