// What a run will need before it starts: the number of ops the step generator
// will emit for an experiment (counted from the generator's structure — ranks,
// layers, passes, ring steps, exchanges — without building anything), the
// bytes a run holds per op and per rank (upper bounds, calibrated on peak RSS),
// and the memory this machine can give. A command refuses at once, with both
// figures, a run that will not fit, instead of failing in std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>

#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule_footprint.hpp"

namespace rm::generate {

// The ring of context group (d, h, t): O rounds of I steps, as the attention kinds
// (sim/placement/*_attention.cpp) lay it out, from the cluster shape alone (no
// Topology). Throws rm::ConfigError for a window that does not divide cp or a
// hierarchical ring over uneven nodes. The op count and the memory model use it.
struct RingShape {
  int64_t O = 1, I = 1;
};
RingShape ring_shape(const Experiment& e, int d, int h, int t);
// The generator's structure checks (ring_shape of every context group, what
// count_step_ops would throw) without throwing: the first refusal, or "".
std::string structure_refusal(const Experiment& e);
// Whether the pattern is dynamic (indices built online by index_build ops).
bool dynamic_patterns(const Experiment& e);

// Ops of generate_step(e, ...) — exact for every experiment the generators
// accept (tests/sim/generate_footprint_test.cpp checks it against generated
// Schedules). Throws rm::ConfigError where the generator would (uneven
// hierarchical groups, windows that do not divide cp).
int64_t count_step_ops(const Experiment& e);
// The same with the data-parallel shortcut (generate_step's Replicas::one): every term
// is a count per replica times dp, so replica 0 holds count_step_ops(e) / dp.
int64_t count_replica_ops(const Experiment& e);

// What a command will hold at its peak.
enum class RunKind {
  schedule,  // generate (and write) a Schedule
  simulate,  // generate, run an engine, build the Timeline and the report
};
using schedule::Footprint;  // schedule_footprint.hpp: a Schedule file's estimate lives with the Schedule
// one_replica: the shortcut's run (count_replica_ops, its ranks only).
Footprint estimate_footprint(const Experiment& e, RunKind kind, bool one_replica = false);
// A streamed run of e (simulate --stream): what it holds at its peak, the ops of
// the chunks in flight (ops: that window, not the step) and what the report gathers.
// The window counts the chunks a generator on its own thread may have made ahead
// of the engine: kStreamQueueOps ops or one chunk, whichever is more
// (pipeline/chunk_queue.hpp).
Footprint estimate_stream_footprint(const Experiment& e, bool one_replica);
inline constexpr int64_t kStreamQueueOps = 1 << 15;
// `simulate --schedule FILE`: the Schedule the file declares (its op_count and
// ranks, known before its ops are allocated), held and simulated, at the
// same bytes per op and per rank as a generated run.
using schedule::estimate_schedule_footprint;
// `ringmaster imbalance` builds no Schedule (ops = 0) but counts every layer's
// pair costs for each of `partitions` partitions: what it holds is those tables.
Footprint estimate_imbalance_footprint(const Experiment& e, int partitions);

// Bytes this process may use: the cgroup limit when one is set (v2 memory.max,
// v1 memory.limit_in_bytes), else MemAvailable (else physical memory).
// RINGMASTER_MEMORY_BYTES overrides it (tests, or to insist).
int64_t machine_memory_bytes();

// Throws rm::ConfigError (exit code 2 in the CLI) with one line — "<what> needs
// ~N GB (M ops), this machine has K GB" — when the footprint exceeds the machine's memory.
void check_fits(const Footprint& f, const std::string& what);
// The same against `have` bytes rather than this machine's.
void check_fits(const Footprint& f, const std::string& what, int64_t have);

}  // namespace rm::generate
