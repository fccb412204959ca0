// The planner's search space: every layout a user would otherwise sweep by
// hand for one experiment — (dp, tp, hp, cp) factorisations of the GPUs, token
// partitions and stripe widths, ring kinds, orders and double-ring windows,
// placements, shuffle, checkpoint and ZeRO stage — enumerated without
// duplicates (a key that cannot change the step, e.g. the ring with cp = 1 or
// the placement with hp = 1, takes one canonical value), each point checked by
// the experiment parser's own parallel rules (check_parallel, on the parsed
// base with the layout's fields set: nothing is re-parsed) and the generator's
// structure checks, so the planner's notion of "valid" is the simulator's.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/experiment.hpp"

namespace rm::search {

// The parallel keys of one point of the space (the rest of the experiment is the base's).
struct Layout {
  int dp = 1, tp = 1, hp = 1, cp = 1;
  Partition partition = Partition::contiguous;
  int64_t stripe_tokens = 128;
  RingKind ring = RingKind::ring;
  int window = 1;
  PlacementOrder placement = PlacementOrder::head_first;
  RingOrder ring_order = RingOrder::rank;
  ShuffleMode shuffle = ShuffleMode::per_call;
  Checkpoint checkpoint = Checkpoint::full;
  int zero_stage = 1;
};

Layout layout_of(const Experiment& e);
// The parallel keys of a layout, as an experiment file spells them.
nlohmann::json layout_json(const Layout& l);
// One line, e.g. "dp1 hp1 cp32 stripe/128 hierarchical head_first per_call ckpt=full zero1".
std::string layout_label(const Layout& l);

// What may vary. A key in `fixed` keeps the base experiment's value; the
// factorisation keys (parallel.dp, parallel.tp, parallel.hp, parallel.cp) can be fixed one by one.
struct SpaceOptions {
  int gpus = 0;                                   // dp*tp*hp*cp; 0 = the cluster's GPUs
  std::set<std::string> fixed;                    // experiment keys, e.g. "parallel.ring"
  std::vector<int64_t> stripe_tokens = {128, 1024, 8192};  // widths tried for stripe and balanced
  int max_tp = 0;                                 // largest tp tried; 0 = the GPUs of a node
};

// The experiment keys the planner searches (what `fixed` may name).
const std::vector<std::string>& searched_keys();

struct Space {
  std::vector<Layout> layouts;      // valid points, in enumeration order (apply_layout gives each's Experiment)
  int64_t enumerated = 0;           // points generated before the validity checks
  int64_t invalid = 0;              // refused by the parser or the generator's structure checks
  std::string first_invalid;        // the first refusal's message (for "nothing valid")
};

// Sets a layout's fields on `e` and checks them (check_parallel: throws
// ConfigError); e.resolved is left as it was. The planner's scratch experiment
// for the checks, the memory model and the floor, which read fields only.
void set_layout(Experiment& e, const Layout& l);
// The same without the checks (parallel_refusal gives their answer).
void assign_layout(Experiment& e, const Layout& l);
// The base experiment with a layout's keys, fields and resolved JSON (what the
// generators, summary_json and a Schedule export read): equal to parsing the
// base's file with the layout's keys as --set overrides (a test checks it),
// without re-parsing. Throws ConfigError as the parser would.
Experiment apply_layout(const Experiment& base, const Layout& l);

// The points enumerate_space would generate (its `enumerated`), counted
// without generating them: a product per group of the keys above the ring's
// inner keys, so a 100,000-node space is counted in milliseconds.
struct SpaceSize {
  int64_t layouts = 0;
  // Of them, hierarchical rings over cp > 1: the generator's structure check
  // walks every rank of each (the enumeration's cost that grows with the GPUs).
  int64_t hierarchical = 0;
};
SpaceSize count_space(const Experiment& base, const SpaceOptions& o);

// progress(enumerated, count_space) after each group of points, when given.
Space enumerate_space(const Experiment& base, const SpaceOptions& o,
                      const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace rm::search
