// The token partition an experiment's context ranks use, for every
// `parallel.partition`, including the sparsity-aware `balanced` one, which
// reads per-chunk work from the sparsity model (summed over every layer and
// head, so one partition serves all layers).
#pragma once

#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/sparsity/token_set.hpp"

namespace rm::placement {

std::vector<sparsity::TokenSet> partition_for(Partition p, const Experiment& e, const sparsity::SparsityModel& m);

}  // namespace rm::placement
