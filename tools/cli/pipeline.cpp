#include "tools/cli/pipeline.hpp"

#include "sim/schedule/schedule_file.hpp"

namespace rm::cli {

sparsity::SparsityModel build_patterns(const Experiment& e) {
  const sparsity::PatternContext ctx{e.model.layers, e.model.heads, e.model.kv_heads, e.workload.seq_len,
                                     e.workload.seed, e.workload.pattern_base_dir};
  return sparsity::build_sparsity(e.workload.pattern, e.workload.pattern_source, ctx);
}

LoadedSchedule load_schedule_file(const std::string& path, const ConfigStore& store) {
  schedule::Schedule s = schedule::read_schedule(path);
  Experiment e = parse_experiment(s.experiment, path + " (its experiment)", "", store);
  return {std::move(s), std::move(e)};
}

}  // namespace rm::cli
