// Schedule generators: one training step of an experiment (or the part its
// `scope` selects) as a schedule::Schedule — per layer the forward, the
// recomputation the checkpoint policy implies and the backward; the
// attention as the experiment's ring kind (attention_kind.hpp) with its
// exchanges and index building (attention.hpp); the dense parts of the layer
// (decoder_layer.hpp); embeddings, loss, data-parallel gradient collectives
// and the optimizer at the ends of a step. docs/generators.md shows the ops.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/placement/work_cache.hpp"
#include "sim/schedule/builder.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/topology/topology.hpp"

namespace rm::generate {

// Throws rm::ConfigError when the experiment cannot be laid out (e.g. a
// hierarchical ring whose context group spans nodes unevenly),
// schedule::ScheduleError if the result does not validate.
// `cache` (may be null) supplies partitions and pair costs (placement/work_cache.hpp).
// Replicas::one is the data-parallel shortcut (docs/generators.md, "Replica symmetry"):
// replica 0's ranks and ops only, the gradient/ZeRO groups marked spans_replicas and
// Schedule::symmetry set; replica_refusal says first whether its replicas are identical.
// Accesses::none leaves out what ops read and write (Op::access -1, no accesses)
// and so the buffers too: a costable-only Schedule, for runs that only simulate it
// (no engine, cost model or report reads them; the runtime, a Schedule file and its
// hash do). On a cp = 1,024 ring interning them was a tenth of the generator's time.
enum class Replicas { all, one };
enum class Accesses { all, none };
schedule::Schedule generate_step(const Experiment& e, const sparsity::SparsityModel& patterns, const topology::Topology& topo,
                                 placement::WorkCache* cache = nullptr, Replicas replicas = Replicas::all,
                                 Accesses accesses = Accesses::all);
// The same step handed out in chunks as it is built (streaming: docs/engines.md,
// "Streaming"): sink(meta, ops, last) after each layer's forward and each layer's
// backward (with its gradient collectives) — with ring_steps, also after each ring
// step where ring_step_cuts_apply — and once more with last = true. `meta`
// is the Schedule so far without its ops (ranks, groups, descriptor tables: all the
// chunk's ops refer to, but for Schedule::descs: each chunk carries the entries
// its ops name, ScheduleBuilder::take_ops); ops keep their ids. The chunks,
// concatenated, are generate_step's ops, op for op (each with the same costs and
// data descriptors); the whole is never validated (generate_step's
// validation of the same experiment is what vouches for it). Accesses::none as for
// generate_step (the buffers stay in `meta`: nothing reads them).
using ChunkSink = std::function<void(const schedule::Schedule& meta, schedule::OpChunk chunk, bool last)>;
void generate_step_chunks(const Experiment& e, const sparsity::SparsityModel& patterns, const topology::Topology& topo,
                          placement::WorkCache* cache, Replicas replicas, const ChunkSink& sink, bool ring_steps = false,
                          Accesses accesses = Accesses::all);
// Whether ring-step cuts can keep a streamed run exact: one context group is
// simulated (a ring emits its steps for all its ranks in turn, but the groups one
// after another: a second group's first step would come after the first group's
// ring had run) and no ZeRO-3 prefetch (each layer's gather waits only for the one
// before it, which a layer of ring-step chunks outlasts).
bool ring_step_cuts_apply(const Experiment& e, Replicas replicas);
// Why the generator cannot emit one replica for all ("" when it can): dp == 1, or a
// replica's ring layout differs from replica 0's (the layouts follow the nodes).
std::string replica_refusal(const Experiment& e, const topology::Topology& topo);

}  // namespace rm::generate
