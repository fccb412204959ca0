// Shared by the data-parallel shortcut's tests (analytic, SimGrid, bound_by):
// the default experiment at 16K tokens and 2 layers, then the case's overrides,
// and the overrides as one line for SCOPED_TRACE.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_store.hpp"
#include "sim/config/experiment.hpp"
#include "sim/pipeline/pipeline.hpp"

namespace rm::test {

inline Experiment symmetry_experiment(const std::vector<std::string>& sets) {
  std::vector<std::string> all{"workload.seq_len=16384", "model.layers=2"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_experiment(ConfigStore{}, "", all);
}

inline std::string joined(const std::vector<std::string>& sets) {
  std::string s;
  for (const auto& x : sets) s += x + " ";
  return s;
}

// Replica 0's Schedule of e under the shortcut; a case it refuses fails the test (with why).
inline schedule::Schedule one_replica(pipeline::Session& session, const Experiment& e) {
  std::string why;
  auto one = session.one_replica_schedule(e, why);
  if (!one) throw std::runtime_error("the data-parallel shortcut refused the case: " + why);
  return std::move(*one);
}

}  // namespace rm::test
