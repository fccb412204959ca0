#include "sim/schedule/carried_experiment.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

namespace rm::schedule {

void check_schedule_fits(const Schedule& s, const Experiment& e, const std::string& path) {
  const int gpus = e.cluster.gpus();
  std::vector<int> rank_on_gpu(size_t(gpus), -1);
  for (const auto& r : s.ranks) {
    if (r.gpu < 0 || r.gpu >= gpus)
      throw ConfigError(fmt::format("{}: ranks[{}].gpu: GPU {} is outside cluster {} (GPUs 0..{})", path, r.id, r.gpu,
                                    e.cluster.name, gpus - 1));
    int& other = rank_on_gpu[size_t(r.gpu)];
    if (other >= 0)
      throw ConfigError(fmt::format("{}: ranks[{}].gpu: GPU {} already holds rank {} (expected one rank per GPU)", path,
                                    r.id, r.gpu, other));
    other = r.id;
  }
  if (int64_t(s.ranks.size()) != e.parallel.world())
    throw ConfigError(fmt::format("{}: the Schedule has {} ranks, its experiment dp*tp*hp*cp = {}*{}*{}*{} = {}", path,
                                  s.ranks.size(), e.parallel.dp, e.parallel.tp, e.parallel.hp, e.parallel.cp,
                                  e.parallel.world()));
}

void check_carried_experiment(const Schedule& s, const Experiment& e, const std::string& path) {
  check_schedule_fits(s, e, path);
  if (s.token_sets.empty()) return;
  int64_t end = 0;
  for (const auto& t : s.token_sets) end = std::max(end, t.end());
  if (end != e.workload.seq_len)
    throw ConfigError(fmt::format("{}: the Schedule's token sets cover tokens 0..{}, but its experiment's "
                                  "$.workload.seq_len is {}: the carried experiment does not describe these ops",
                                  path, end - 1, e.workload.seq_len));
}

}  // namespace rm::schedule
