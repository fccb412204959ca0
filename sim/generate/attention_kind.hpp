// The attention kinds the generators lay rings with live in placement
// (sim/placement/attention_kind.hpp, the one owner of ring layouts); this
// header names them for the generators and gives the schedule its name.
#pragma once

#include <string>

#include "sim/config/experiment.hpp"
#include "sim/placement/attention_kind.hpp"

namespace rm::generate {

using placement::AttentionKind;
using placement::make_attention_kind;
using placement::RingLayout;

// The schedule's generator name, following the experiment keys
// (docs/generators.md): "single_gpu" (cp = 1, hp = 1), "ulysses" (cp = 1,
// hp > 1), else "<partition>-<ring>" with a "2d-" prefix when hp > 1:
// "stripe-hierarchical", "zigzag-ring", "2d-zigzag-double_ring"; with tp > 1
// prefixed "tp<N>-" ("tp2-stripe-hierarchical").
std::string generator_name(const Experiment& e);

}  // namespace rm::generate
