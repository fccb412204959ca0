// Does a Schedule agree with the experiment it carries? The checks that need
// only the two of them (no pattern, generator or engine), so that every reader
// of a Schedule file runs them before it trusts the experiment's sizes:
// `simulate --schedule` (pipeline::check_schedule_experiment adds the pattern
// and op-count checks) and ringmaster-run, before any rank allocates.
#pragma once

#include <string>

#include "sim/config/experiment.hpp"
#include "sim/schedule/schedule.hpp"

namespace rm::schedule {

// Throws ConfigError naming the file and rank unless every rank is on its own
// GPU of the experiment's cluster and there are dp*tp*hp*cp ranks.
void check_schedule_fits(const Schedule& s, const Experiment& e, const std::string& path);

// check_schedule_fits, then: the token sets (when there are any) end at the
// experiment's seq_len (validate() refuses one beyond it; one that ends short
// means seq_len is not these ops', and every size read from it would be off).
// Throws ConfigError naming the file.
void check_carried_experiment(const Schedule& s, const Experiment& e, const std::string& path);

}  // namespace rm::schedule
