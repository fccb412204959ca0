// The steps every modelling command runs in the same order: experiment ->
// sparsity model -> topology -> schedule. Kept in one place so `imbalance`,
// `schedule` and `simulate` cannot drift apart.
#pragma once

#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/sparsity/sparsity_model.hpp"
#include "sim/topology/topology.hpp"

namespace rm::cli {

sparsity::SparsityModel build_patterns(const Experiment& e);

// Reads a Schedule file (validating it) and the experiment it carries.
struct LoadedSchedule {
  schedule::Schedule schedule;
  Experiment experiment;
};
LoadedSchedule load_schedule_file(const std::string& path, const ConfigStore& store);

}  // namespace rm::cli
